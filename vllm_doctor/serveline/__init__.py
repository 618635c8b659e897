"""The serve line: read from where it is written, parsed as vLLM's argparse reads it.

The parts, bottom up:

* ``options``: every `vllm serve` option of the releases the knowledge covers, and how a flag
  as written resolves to one (imports nothing of the doctor but the knowledge tables);
* ``words``: the shell word reader (quotes, continuations, redirections, ``bash -c``-style
  command lists, wrappers and ``KEY=VALUE`` prefixes, the vLLM entry points);
* ``line``: the serve-line object (``ServeLine``) every reader produces, and its facts;
* ``values``: an option's value read as vLLM's converters read it (human-readable ints,
  ranges, JSON, ``key=value`` lists), for each kind a release gives the option;
* ``parser``: the parser that follows vLLM's ``FlexibleArgumentParser`` and argparse;
* ``render``: the re-renderer for corrected commands;
* one reader per source, each giving a ``ServeLine``: ``command`` (a pasted command line; an
  argument list goes to ``parser.parse_serve_argv`` directly), ``config`` (a serve config
  YAML) and ``manifest`` (Kubernetes manifests, compose files, Dockerfiles).

Nothing is imported here: ``check`` loads only the parts it needs.
"""

# the name bad serve-line input is reported under ("vllm-doctor: serve line: ...")
SERVE_LINE = "serve line"
