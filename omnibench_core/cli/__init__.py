"""The command line's pieces, on the top floor of the house: every flag's typed check and the
shared flags declared once (:mod:`.flags`), settings read from Invoke's configuration
(:mod:`.config`). ``tasks.py`` is built from them; nothing in the library imports them."""
