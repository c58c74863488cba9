"""The wire: what crosses between the grader's processes, and how it is bounded.

* :mod:`.frames`       - frames (a JSON header, a binary body) and the size bounds of a task;
* :mod:`.bounded_json` - JSON from the sandbox, bounded on the raw bytes before it is parsed;
* :mod:`.observation`  - the observation codec: what a call into student code did, as plain data;
* :mod:`.types`        - the typed frames (task, limits, result) and the run's options, each
  option and limit with its one default;
* :mod:`.spec`         - the frame protocol written down: every frame of every channel, as text
  and as data that ``tests/test_frame_spec.py`` checks each frame kind and a real run against.

The wire imports nothing else of :mod:`autograder`: the types it carries beyond plain data (the
check library's ``TensorState`` and ``CallRecorder``) register their codecs with it
(:func:`autograder.wire.observation.register`).
"""
