"""vllm-doctor fleet: every node of a multi-node deployment judged alone and against the others.

The doctor goes where the distributed engines already are, with no transport of its own:

- collection, one module per engine: ``ray_engine.py`` (one Ray task per alive node, pinned
  with node-affinity scheduling, under a deadline; the doctor reaches the nodes through Ray's
  runtime environment or an existing install) and ``documents.py`` (the ``vllm-doctor facts
  --format json`` documents a Kubernetes Job or DaemonSet printed by ``k8s.py`` collected, or
  ``kubectl logs`` of it); both give ``node.Node`` objects, each with the very facts
  ``vllm-doctor facts`` collects on that node (``remote.py`` runs the collectors there);
- the fleet facts (``fleetfacts.py``): the compared quantities of ``quantities.py`` grouped by
  value, the placement vLLM's Ray executor would make (``placement.py``), the model's files and
  /dev/shm on the nodes that would hold ranks; fleet rules (``rules/fleet/``, category FLEET) are
  YAML rules over those facts, evaluated by the same engine as every other rule;
- judgement and report (``judge.py``, ``report.py``): each node judged by the node rules as
  ``check`` judges one machine (once per distinct set of facts, as soon as it answers), the
  fleet by the fleet rules; every output format names the node of each finding;
- ``probe_ray.py`` (`probe --ray`): the probes' ranks on a Ray cluster, one actor per GPU
  (``rank_host.py``) placed and numbered as vLLM's Ray executor places its workers, each
  running the probe worker the local runner and torchrun run, under the local runner's
  deadlines (a rank that never joins the group is a finding naming it and its node).

Nothing here imports ray at module level: the ``fleet`` command imports it only for ``--ray``.
"""
