"""The acceptor head (:mod:`.head`): one class per sequence."""
