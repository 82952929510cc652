"""The command line's pieces, on the top floor of the house: every flag declared once with its check,
help and default (:mod:`.declared`), a task made from its flags (:mod:`.command`), the typed checks
(:mod:`.flags`) and settings read from Invoke's configuration (:mod:`.config`). ``tasks.py`` is
built from them; nothing in the library imports them."""
