"""Every panel that shows the open input, drawn for it after every open path: the one place that knows every
tab's panel (the tabs never import each other)."""
from __future__ import annotations

from kame_core.settings import Settings

from ..open import views
from ..open.results import Panels
from ..tabs import compare, delay, evolution, live, timeline


def panels(state: views.AppSession | None = None, *, settings: Settings | None = None) -> Panels:
    """Every panel that shows the open input, as opening it leaves them. Every open path (a scenario of the
    folder, an upload, a training dialogue, a Live upload, a microphone or Talk session, a pick from the made
    list) ends here, so no panel keeps the previous input's numbers; the Forced-delay tab's results and the
    Live tab's run, which need an action, are cleared unless they are about this very input already (a refused
    open keeps them). ``settings.content`` names the scenarios folder the picker lists."""
    session = views.session_of(state)
    cleared, curve_cleared = delay.cleared(session)
    return Panels(session, timeline.panel(session), compare.compare(session), evolution.evolution(session),
                  cleared, curve_cleared, views.bar(session, settings or Settings()), views.link_text(session),
                  live.cleared(session))
