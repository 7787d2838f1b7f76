"""A pickle planted by someone without the signing key, which shows whether it was loaded."""

import os


class RunsCode:
    """A pickle that, loaded, makes the directory ``marker``: proof that a planted pickle ran."""

    def __init__(self, marker):
        self.marker = os.fspath(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)
