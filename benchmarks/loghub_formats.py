"""Loghub log formats: the header layout of each Loghub-2k dataset, to cut out its Content.

l4 parses *messages*.  Loghub's raw lines start with dataset-specific headers (dates, pids,
components, levels) that its ground-truth templates leave out, so both parser paths are fed
the Content field, exactly as the Loghub/logparser benchmark feeds its parsers.  The formats
are the ones of the logparser benchmark settings; ``<Field>`` is a named field, everything
else is literal (a run of spaces matches any run of whitespace), and the regex is built the
way logparser builds it, so the Content we extract is the Content the ground truth was made
from (``benchmarks/perf.py`` checks it against ``*_structured.csv``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: dataset -> Loghub log format (logparser benchmark settings)
LOG_FORMATS: dict[str, str] = {
    "HDFS": r"<Date> <Time> <Pid> <Level> <Component>: <Content>",
    "Hadoop": r"<Date> <Time> <Level> \[<Process>\] <Component>: <Content>",
    "Spark": r"<Date> <Time> <Level> <Component>: <Content>",
    "Zookeeper": r"<Date> <Time> - <Level>  \[<Node>:<Component>@<Id>\] - <Content>",
    "BGL": r"<Label> <Timestamp> <Date> <Node> <Time> <NodeRepeat> <Type> <Component> <Level> <Content>",
    "HPC": r"<LogId> <Node> <Component> <State> <Time> <Flag> <Content>",
    "Thunderbird": r"<Label> <Timestamp> <Date> <User> <Month> <Day> <Time> <Location> <Component>(\[<PID>\])?: <Content>",
    "Windows": r"<Date> <Time>, <Level>                  <Component>    <Content>",
    "Linux": r"<Month> <Date> <Time> <Level> <Component>(\[<PID>\])?: <Content>",
    "Android": r"<Date> <Time>  <Pid>  <Tid> <Level> <Component>: <Content>",
    "HealthApp": r"<Time>\|<Component>\|<Pid>\|<Content>",
    "Apache": r"\[<Time>\] \[<Level>\] <Content>",
    "Proxifier": r"\[<Time>\] <Program> - <Content>",
    "OpenSSH": r"<Date> <Day> <Time> <Component> sshd\[<Pid>\]: <Content>",
    "OpenStack": r"<Logrecord> <Date> <Time> <Pid> <Level> <Component> \[<ADDR>\] <Content>",
    "Mac": r"<Month>  <Date> <Time> <User> <Component>\[<PID>\]( \(<Address>\))?: <Content>",
}


@dataclass(frozen=True)
class LogFormat:
    """A compiled Loghub format: its field names and the whole-line regex."""

    dataset: str
    headers: tuple[str, ...]
    regex: re.Pattern[str]

    def content(self, line: str) -> str | None:
        """The Content field of ``line``, or None when the line does not fit the format."""
        m = self.regex.match(line.strip())
        return m.group("Content") if m else None


def format_regex(log_format: str) -> tuple[tuple[str, ...], re.Pattern[str]]:
    """(field names, regex) for a Loghub format, built as logparser builds it: every field is
    a lazy ``.*?`` group, literal spaces match any whitespace run, the line is anchored."""
    headers: list[str] = []
    parts = re.split(r"(<[^<>]+>)", log_format)
    regex = ""
    for k, part in enumerate(parts):
        if k % 2 == 0:
            regex += re.sub(" +", r"\\s+", part)
        else:
            name = part.strip("<>")
            regex += f"(?P<{name}>.*?)"
            headers.append(name)
    return tuple(headers), re.compile("^" + regex + "$")


def log_format(dataset: str) -> LogFormat:
    """The compiled format of a Loghub dataset; a clear error for an unknown one."""
    try:
        fmt = LOG_FORMATS[dataset]
    except KeyError:
        raise ValueError(
            f"no Loghub log format for {dataset!r}; known: {', '.join(sorted(LOG_FORMATS))}"
        ) from None
    headers, regex = format_regex(fmt)
    return LogFormat(dataset=dataset, headers=headers, regex=regex)
