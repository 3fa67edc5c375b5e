//go:build linux

package realollama

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Log is Ollama's combined stdout and stderr: its own slog lines, the
// runner's llama.cpp output, and gin's request lines. It is safe for
// concurrent use.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Mark is a position in the log; Since returns what was logged after it.
type Mark int

// Mark returns the current end of the log.
func (l *Log) Mark() Mark {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Mark(l.buf.Len())
}

// Since returns the text logged after m.
func (l *Log) Since(m Mark) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf.Bytes()
	if int(m) > len(b) {
		return ""
	}
	return string(b[m:])
}

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
func (l *Log) Requests() []Request { return Requests(l.String()) }

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
