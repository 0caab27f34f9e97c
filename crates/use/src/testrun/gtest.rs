//! GoogleTest's text protocol: the lines a client prints as tests start and end, the
//! `--gtest_list_tests` listing, filters, and the XML report (`GTEST_OUTPUT=xml:FILE`).

use quick_xml::events::Event;

/// One event line of a client's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    Run(&'a str),
    Ok(&'a str, Option<u64>),
    Failed(&'a str, Option<u64>),
    Skipped(&'a str, Option<u64>),
    Other,
}

/// Parses `[ RUN      ] Suite.Name`, `[       OK ] Suite.Name (12 ms)`, `[  FAILED  ] …`,
/// `[  SKIPPED ] …`. Summary lines (`[  FAILED  ] 2 tests, listed below:`) come back as
/// `Failed` with that text; the runner only accepts an end for the test that is running.
pub fn parse_line(line: &str) -> Line<'_> {
    let line = line.trim_end();
    let Some(rest) = line.strip_prefix('[') else {
        return Line::Other;
    };
    let Some(close) = rest.find(']') else {
        return Line::Other;
    };
    let tag = rest[..close].trim();
    let body = rest[close + 1..].trim();
    let (name, ms) = split_time(body);
    match tag {
        "RUN" => Line::Run(body),
        "OK" => Line::Ok(name, ms),
        "FAILED" => Line::Failed(name, ms),
        "SKIPPED" => Line::Skipped(name, ms),
        _ => Line::Other,
    }
}

/// `Suite.Name (12 ms)` → (`Suite.Name`, Some(12)). Parameterized names carry a `, where …`
/// tail after failures: it is cut off.
fn split_time(body: &str) -> (&str, Option<u64>) {
    let body = body.split(", where ").next().unwrap_or(body);
    if let Some(open) = body.rfind(" (")
        && let Some(ms) = body[open + 2..].strip_suffix(" ms)")
        && let Ok(ms) = ms.parse()
    {
        return (&body[..open], Some(ms));
    }
    (body, None)
}

/// The full names printed by `--gtest_list_tests`, in order.
pub fn parse_list(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut suite = String::new();
    for line in text.lines() {
        let content = line.split("  #").next().unwrap_or(line);
        if content.trim().is_empty() {
            continue;
        }
        if let Some(test) = line.strip_prefix("  ") {
            let test = test.split("  #").next().unwrap_or(test).trim();
            if !suite.is_empty() && !test.is_empty() {
                out.push(format!("{suite}{test}"));
            }
        } else if content.trim_end().ends_with('.') && !content.contains(' ') {
            suite = content.trim_end().to_string();
        }
    }
    out
}

/// Longest filter argument passed to one client run (Linux limits one argument to 128 KiB).
pub const MAX_FILTER: usize = 100_000;

/// A test case from a gtest XML report.
#[derive(Debug, Clone, PartialEq)]
pub struct XmlCase {
    pub name: String,
    /// passed, failed or skipped.
    pub outcome: &'static str,
    pub seconds: f64,
    /// The failure messages, joined.
    pub message: String,
}

/// Reads a gtest XML report: every `<testcase>` with its result.
pub fn parse_xml(bytes: &[u8]) -> Result<Vec<XmlCase>, String> {
    let mut reader = quick_xml::Reader::from_reader(bytes);
    reader.config_mut().trim_text(false);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut current: Option<XmlCase> = None;
    let mut in_failure = false;
    loop {
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("at byte {}: {e}", reader.buffer_position()))?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                match e.name().as_ref() {
                    "testcase" => {
                        let mut name = String::new();
                        let mut class = String::new();
                        let mut seconds = 0.0;
                        let mut outcome = "passed";
                        for a in e.attributes().flatten() {
                            let v = a
                                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .map(|v| v.into_owned())
                                .unwrap_or_default();
                            match a.key.as_ref() {
                                "name" => name = v,
                                "classname" => class = v,
                                "time" => seconds = v.parse().unwrap_or(0.0),
                                "result" if v == "skipped" || v == "suppressed" => {
                                    outcome = "skipped"
                                }
                                "status" if v == "notrun" => outcome = "skipped",
                                _ => {}
                            }
                        }
                        let case = XmlCase {
                            name: if class.is_empty() {
                                name
                            } else {
                                format!("{class}.{name}")
                            },
                            outcome,
                            seconds,
                            message: String::new(),
                        };
                        if empty {
                            out.push(case);
                        } else {
                            current = Some(case);
                        }
                    }
                    "failure" | "error" => {
                        if let Some(c) = current.as_mut() {
                            c.outcome = "failed";
                            for a in e.attributes().flatten() {
                                if a.key.as_ref() == "message" {
                                    let v = a
                                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                        .unwrap_or_default();
                                    if !c.message.is_empty() {
                                        c.message.push('\n');
                                    }
                                    c.message.push_str(&v);
                                }
                            }
                            in_failure = !empty;
                        }
                    }
                    "skipped" => {
                        if let Some(c) = current.as_mut() {
                            c.outcome = "skipped";
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) => match e.name().as_ref() {
                "testcase" => {
                    if let Some(c) = current.take() {
                        out.push(c);
                    }
                }
                "failure" | "error" => in_failure = false,
                _ => {}
            },
            Event::CData(ref t) if in_failure => {
                if let Some(c) = current.as_mut()
                    && c.message.is_empty()
                {
                    c.message = t.to_string();
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lines() {
        assert_eq!(parse_line("[ RUN      ] A.b"), Line::Run("A.b"));
        assert_eq!(
            parse_line("[       OK ] A.b (12 ms)"),
            Line::Ok("A.b", Some(12))
        );
        assert_eq!(
            parse_line("[  FAILED  ] P/A.b/0, where GetParam() = 4 (3 ms)"),
            Line::Failed("P/A.b/0", None)
        );
        assert_eq!(
            parse_line("[  SKIPPED ] A.c (0 ms)"),
            Line::Skipped("A.c", Some(0))
        );
        assert_eq!(parse_line("[==========] 3 tests"), Line::Other);
        assert_eq!(parse_line("hello"), Line::Other);
    }

    #[test]
    fn listing() {
        let l = "A.\n  one\n  two  # GetParam() = 3\nP/B.  # TypeParam = int\n  x\n";
        assert_eq!(parse_list(l), ["A.one", "A.two", "P/B.x"]);
    }

    #[test]
    fn xml() {
        let x = br#"<?xml version="1.0"?><testsuites><testsuite name="A">
<testcase name="one" status="run" result="completed" time="0.5" classname="A"/>
<testcase name="two" status="run" result="completed" time="0" classname="A"><failure message="x.cpp:3&#x0A;Expected: 1" type=""><![CDATA[x.cpp:3
Expected: 1]]></failure></testcase>
<testcase name="three" status="run" result="skipped" time="0" classname="A"><skipped message=""/></testcase>
</testsuite></testsuites>"#;
        let c = parse_xml(x).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].name.as_str(), c[0].outcome), ("A.one", "passed"));
        assert_eq!(c[1].outcome, "failed");
        assert!(c[1].message.contains("Expected: 1"));
        assert_eq!(c[2].outcome, "skipped");
    }
}
