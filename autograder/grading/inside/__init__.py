"""Inside the sandbox (bubblewrap), next to student code: the warm zygote and its relay
(:mod:`.zygote`), the student process and its test process (:mod:`.student`). Imports nothing of
the host side."""
