"""The Talk page: the browser client of the live protocol, in one place for the server and the app.

* :mod:`.talk` -- its markup and settings (:func:`~.talk.talk_html`, :func:`~.talk.talk_config`), run by
  ``static/talk.js`` with ``static/protocol.js`` (the protocol's messages) and ``static/talk-worklets.js``;
* :mod:`.mount` -- the page on its own at ``GET /`` of ``python -m kame_core.serve``, admitted as the websocket is;
* :mod:`.assets` -- its files, served at one route (:data:`~.assets.PAGE`; the app serves a larger set built on it);
* :mod:`.palette` -- the studio's colours (hint levels, marks), defined once: the page draws with them, and so do
  the app's Timeline, Compare and Evolution figures.

The app (``demo/``) reuses all four; nothing here imports the app.
"""
