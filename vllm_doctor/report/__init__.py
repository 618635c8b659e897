"""The check document (``document``) and its renderers (``text``, ``formats``, ``output``)."""

# the formats `check` renders and the levels `--fail-on` takes (the settings read them too)
FORMATS = ("text", "json", "markdown", "sarif", "junit", "github", "gitlab")
FAIL_ON = ("error", "warning", "info", "never")
