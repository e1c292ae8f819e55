"""hosts: the address checks both servers make before they warn, load or bind."""

from __future__ import annotations

import errno
import re
import socket

import pytest

from rightsize.errors import SpecError
from rightsize.hosts import check_listenable, host_error


def test_an_address_this_machine_cannot_listen_on_is_refused_naming_host() -> None:
    for host in ("999.999.1.1", "no-such-host.invalid"):
        said = rf"^--host: cannot listen on {re.escape(repr(host))} \(.*\); give an address of this machine"
        with pytest.raises(SpecError, match=said):
            check_listenable(host)
    with pytest.raises(SpecError, match=r"^--host: is empty"):
        check_listenable(" ")
    check_listenable("127.0.0.1")  # binds a free port once and lets it go


def test_a_port_failure_is_not_the_hosts() -> None:
    assert host_error(OSError(errno.EADDRINUSE, "Address already in use"), "127.0.0.1") is None
    error = host_error(socket.gaierror(-2, "Name or service not known"), "x.invalid")
    assert error is not None and str(error).startswith("--host: cannot listen on 'x.invalid' (Name or service")
