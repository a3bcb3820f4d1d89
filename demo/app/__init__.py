"""The app itself: its page (:mod:`.page`: the seven tabs composed), the FastAPI server around it (:mod:`.server`),
its static files (:mod:`.assets`), the hardware and stacks it runs on (:mod:`.hardware`, :mod:`.stacks`), the
per-user session files and event streams, the files a client hands a callback (:mod:`.client_files`), the judge
that scores an answer (:mod:`.scoring`) and the function that draws every tab's panels after an open
(:mod:`.panels`)."""
