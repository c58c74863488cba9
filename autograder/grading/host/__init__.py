"""On the host, never running student code: the bubblewrap sandbox (:mod:`.sandbox`), one
sandbox and one judge per worker (:mod:`.supervisor`), every verdict (:mod:`.judge`), the pool of
workers (:mod:`.scheduler`)."""
