"""Scripts that make the real captures shipped in ``captures/``.

``recording`` starts and stops the Tansu broker and tcpdump on loopback;
``record_broker`` drives Tansu with the kafka-python client; ``scripted_peer``,
``kio_codec`` and ``stories`` make a small Kafka peer whose responses are encoded
by kio; ``record_peer`` records that peer answering kafka-python's admin client.
None of this is part of the ``kdissect`` package.
"""
