"""A/B experiments (``invoke ab``): two sides measured round by round on one host, judged on the
rounds' paired values. ``record`` owns the A/B file, ``execute`` runs the schedule, ``analysis``
judges it, ``writing`` publishes ab.md and ab.json; :mod:`.front_door` (:func:`ab`, :func:`ab_text`) is
what the task calls. Nothing is imported here: a module of the layer costs only its own imports."""
