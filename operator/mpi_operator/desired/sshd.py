"""The TCP port a worker's sshd listens on, when the pod spec itself says so (pure).

The operator probes sshd only on a port it knows (a guessed 22 could leave a working worker never
Ready: see "Deviations from upstream" in docs/architecture.md). In order: the container port named
`ssh`; else the sshd command line, read as sshd's getopt does (`-o ListenAddress=addr:port` first,
then the first `-p`, then the first `-o Port`), found either in a `sh -c` script's simple commands
or as the first argv word named `sshd` (wrappers may come first). None when no such sshd is found,
its options name no port (it is then in a config file), a port is not a number in 1..65535, an
option is unknown or lacks its argument, or the script cannot be split.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

SSH_PORT_NAME: Final = "ssh"
SSHD: Final = "sshd"

# OpenSSH sshd's getopt string, "C:E:b:c:f:g:h:k:o:p:u:46DGQRTdeiqrtV".
_WITH_ARGUMENT: Final = frozenset("CEbcfghkopu")
_FLAGS: Final = frozenset("46DGQRTdeiqrtV")

_SHELLS: Final = frozenset({"sh", "ash", "dash", "bash", "ksh", "mksh", "zsh", "busybox"})
_SHELL_OPTION_WITH_ARGUMENT: Final = frozenset({"-o", "+o", "-O", "+O"})
_SHELL_OPTION: Final = re.compile(r"[-+][A-Za-z]+|--[a-z][a-z-]*")
_SHELL_PUNCTUATION: Final = "();<>|&\n"
_PREFIX_WORDS: Final = frozenset({"exec", "nohup"})
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)

_PORT: Final = re.compile(r"[0-9]{1,5}")
# sshd's strdelim: the keyword ends at whitespace or "="; then whitespace, at most one "=",
# whitespace.
_CONFIG_LINE: Final = re.compile(r"\s*([^\s=]+)(?:\s*=\s*|\s+|$)(.*)", re.DOTALL)


def parse_port(text: str) -> int | None:
    """A decimal TCP port, 1..65535, else None."""
    if not _PORT.fullmatch(text):
        return None
    number = int(text)
    return number if 1 <= number <= 65535 else None


def named_ssh_port(container: Mapping[str, Any]) -> int | None:
    """`containerPort` of the container port named `ssh`, if it is a valid port number."""
    for port in container.get("ports") or []:
        if isinstance(port, Mapping) and port.get("name") == SSH_PORT_NAME:
            number = port.get("containerPort")
            if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= 65535:
                return number
            return None
    return None


def _is_sshd(word: str) -> bool:
    return posixpath.basename(word) == SSHD


def _shell_script_index(argv: Sequence[str]) -> int | None:
    """The index of the `-c` script when `argv[0]` is a shell that runs one (bash: the first
    operand)."""
    if not argv or posixpath.basename(argv[0]) not in _SHELLS:
        return None
    has_c, i = False, 1
    if posixpath.basename(argv[0]) == "busybox":
        if len(argv) < 2 or argv[1] not in _SHELLS:
            return None
        i = 2
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word in _SHELL_OPTION_WITH_ARGUMENT:
            i += 2
            continue
        if not _SHELL_OPTION.fullmatch(word):
            break
        has_c = has_c or (word.startswith("-") and not word.startswith("--") and "c" in word)
        i += 1
    return i if has_c and i < len(argv) else None


def _simple_commands(script: str) -> list[list[str]] | None:
    """The script's simple commands as words, split at operators, redirections and newlines."""
    # The shell drops a backslash-newline; shlex would keep the newline as an escaped character.
    lexer = shlex.shlex(
        script.replace("\\\n", ""), posix=True, punctuation_chars=_SHELL_PUNCTUATION
    )
    lexer.whitespace = " \t\r"  # newlines end a command, so they must reach us as punctuation
    lexer.whitespace_split = True
    lexer.commenters = ""  # shlex's comments would swallow the newline that ends the command
    commands: list[list[str]] = [[]]
    in_comment = False
    try:
        for token in lexer:
            if token and all(char in _SHELL_PUNCTUATION for char in token):
                in_comment = in_comment and "\n" not in token
                if not in_comment:
                    commands.append([])
            elif in_comment or token.startswith("#"):
                in_comment = True
            else:
                commands[-1].append(token)
    except ValueError:
        return None
    return [words for words in commands if words]


def _sshd_in_script(script: str) -> list[str] | None:
    for words in _simple_commands(script) or []:
        start = 0
        while start < len(words) and (
            words[start] in _PREFIX_WORDS or _ASSIGNMENT.fullmatch(words[start])
        ):
            start += 1
        if start < len(words) and _is_sshd(words[start]):
            return words[start + 1 :]
    return None


def sshd_arguments(argv: Sequence[str]) -> list[str] | None:
    """The arguments sshd gets from the container's `argv` (command + args), or None if none is
    seen."""
    rest: Sequence[str] = argv
    script_at = _shell_script_index(argv)
    if script_at is not None:
        found = _sshd_in_script(argv[script_at])
        if found is not None:
            return found
        rest = argv[script_at + 1 :]
    for i, word in enumerate(rest):
        if _is_sshd(word):
            return list(rest[i + 1 :])
    return None


def _options(arguments: Sequence[str]) -> list[tuple[str, str]] | None:
    """(letter, argument) of each option taking one, in order, as glibc's getopt finds them
    (operands are skipped: getopt moves them to the end); None for an unknown option or a missing
    argument."""
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(arguments):
        word = arguments[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            continue
        for j in range(1, len(word)):
            letter = word[j]
            if letter in _FLAGS:
                continue
            if letter not in _WITH_ARGUMENT:
                return None
            if j + 1 < len(word):
                found.append((letter, word[j + 1 :]))
            elif i < len(arguments):
                found.append((letter, arguments[i]))
                i += 1
            else:
                return None
            break
    return found


def _config_option(line: str) -> tuple[str, list[str]] | None:
    """`-o`'s argument as sshd reads a config line: (lower-case keyword, values); None if
    malformed."""
    match = _CONFIG_LINE.fullmatch(line)
    if match is None:
        return None
    try:
        values = shlex.split(match[2], comments=True)
    except ValueError:
        return None
    return match[1].lower(), values


def _listen_port(address: str) -> tuple[bool, int | None]:
    """(valid, port) of a ListenAddress value: `host`, `host:port`, `[host]:port`, or a bare IPv6
    address."""
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if not bracket or not host:
            return False, None
        if not rest:
            return True, None
        port = parse_port(rest[1:]) if rest.startswith(":") else None
        return port is not None, port
    if address.count(":") != 1:
        return True, None  # no colon, or a bare IPv6 address
    host, _, text = address.partition(":")
    port = parse_port(text)
    return bool(host) and port is not None, port


def sshd_port(arguments: Sequence[str]) -> int | None:
    """The port sshd's command-line `arguments` make it listen on; None when they do not say or are
    bad."""
    options = _options(arguments)
    if options is None:
        return None
    listen: int | None = None
    flag: int | None = None
    config: int | None = None
    for letter, value in options:
        if letter == "p":
            port = parse_port(value)
            if port is None:
                return None  # sshd: "Bad port number."
            flag = flag or port
        elif letter == "o":
            option = _config_option(value)
            if option is None:
                return None
            keyword, values = option
            if keyword == "port":
                port = parse_port(values[0]) if len(values) == 1 else None
                if port is None:
                    return None
                config = config or port
            elif keyword == "listenaddress":
                # An optional "rdomain <name>" may follow the address.
                if len(values) not in (1, 3) or (len(values) == 3 and values[1] != "rdomain"):
                    return None
                valid, port = _listen_port(values[0])
                if not valid:
                    return None
                listen = listen or port
    return listen or flag or config


def container_ssh_port(container: Mapping[str, Any]) -> int | None:
    """The port the container's sshd listens on, from its spec alone (see the module docstring).

    `container` is as the pod will run it: the operator's default command already applied.
    """
    named = named_ssh_port(container)
    if named is not None:
        return named
    argv: list[str] = []
    for key in ("command", "args"):
        words = container.get(key)
        if isinstance(words, list):  # a string here (a malformed template) is no argv
            argv.extend(str(word) for word in words)
    arguments = sshd_arguments(argv)
    return None if arguments is None else sshd_port(arguments)
