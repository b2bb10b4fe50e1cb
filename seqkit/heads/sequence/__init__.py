"""What the acceptor and tagger heads share: inputs (:mod:`.inputs`), the head base
(:mod:`.head`), the step view (:mod:`.stepper`), prediction of raw input (:mod:`.predict`) and the
streaming of an export (:mod:`.stream`)."""
