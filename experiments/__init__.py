"""The standard suite: Ray's documented fault-tolerance claims, one experiment each.

Installed with raychaos as ``chaos.experiments``, so any repository can run it against its
own image: ``pytest --pyargs chaos.experiments --raychaos-image my/ray:tag``. In a checkout,
``pytest experiments/`` runs the same files. ``workloads/`` is not imported here: it is
shipped into the containers (which have Ray) as the top-level package ``workloads``.
"""
