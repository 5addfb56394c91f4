"""Start-up hook (reserved; the activation issue fills in the .pth trigger).

kwker_install.pth, installed at the top of site-packages, runs a single cheap
check of the KWKER_INSTALL environment variable in every Python process; only
when it is set is this module imported.  It must stay light: it never imports
torch or kwker itself, it only arranges for kwker.install() to run once torch
has been imported.
"""


def activate() -> None:
    """Called from kwker_install.pth when KWKER_INSTALL is set."""
    # Filled in by the activation issue.
