//go:build linux

package realollama

import (
	"github.com/vacancyd/vacancyd/internal/testutil/syncbuf"
	"regexp"
	"strconv"
	"strings"
)

// Log is Ollama's combined stdout and stderr: its own slog lines, the
// runner's llama.cpp output, and gin's request lines. It is safe for
// concurrent use; Mark and Since read what came after a point.
type Log = syncbuf.Buffer

// Mark is a position in the log.
type Mark = syncbuf.Mark

// Request is one request line of Ollama's HTTP router, written when the
// handler returns, e.g.
//
//	[GIN] 2026/11/30 - 01:31:56 | 200 |  1.989871222s |       127.0.0.1 | POST     "/api/generate"
type Request struct {
	Status int
	Method string
	Path   string
	Client string
	Line   string
}

var ginLine = regexp.MustCompile(`^\[GIN\] [^|]*\|\s*(\d{3})\s*\|[^|]*\|\s*(\S+)\s*\|\s*([A-Z]+)\s+"([^"]*)"`)

// Requests parses the request lines in text (the whole log or a Since).
func Requests(text string) []Request {
	var out []Request
	for line := range strings.Lines(text) {
		m := ginLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		status, _ := strconv.Atoi(m[1])
		out = append(out, Request{Status: status, Client: m[2], Method: m[3], Path: m[4], Line: strings.TrimSpace(line)})
	}
	return out
}

// Requests parses every request line logged so far.

// Count returns how many requests in rs had method and path.
func Count(rs []Request, method, path string) int {
	n := 0
	for _, r := range rs {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}
