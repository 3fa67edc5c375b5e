// Package adaptertest holds helpers shared by the adapter tests: concrete
// requests for table rows and a walk over a whole table.
package adaptertest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/adapter"
)

// ExamplePath returns a concrete path that the row pattern p matches:
// "{name}" becomes "x-name" and a final "..." becomes "a/b".
func ExamplePath(p string) string {
	if p == "/" {
		return p
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		switch {
		case s == "...":
			parts[i] = "a/b"
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			parts[i] = "x-" + s[1:len(s)-1]
		}
	}
	return "/" + strings.Join(parts, "/")
}

// Request builds a bodiless request for a row, on its example path.
func Request(rt adapter.Route) *adapter.Request {
	return &adapter.Request{Method: rt.Method, Path: ExamplePath(rt.Path), Header: http.Header{}}
}

// CheckRoutes classifies one example request per row of a's table and fails
// t for every row whose decision is not the row's own class and pattern. A
// HEAD request is also sent for every GET row. prepare, when non-nil, may
// add a body or headers for rows whose adapter reads them.
func CheckRoutes(t *testing.T, a adapter.Adapter, prepare func(adapter.Route, *adapter.Request)) {
	t.Helper()
	routes := a.Routes()
	if len(routes) == 0 {
		t.Fatalf("%s: empty route table", a.Kind())
	}
	for _, rt := range routes {
		methods := []string{rt.Method}
		if rt.Method == "GET" {
			methods = append(methods, "HEAD")
		}
		for _, m := range methods {
			req := Request(rt)
			req.Method = m
			if prepare != nil {
				prepare(rt, req)
			}
			d := a.Classify(req)
			if d.Class != rt.Class || d.Pattern != rt.Path || d.OwnResults != rt.OwnResults {
				t.Errorf("%s %s %s (row %s, %s): got class %s pattern %q own=%v (%s); want %s pattern %q own=%v",
					a.Kind(), m, req.Path, rt, rt.Source, d.Class, d.Pattern, d.OwnResults, d.Reason, rt.Class, rt.Path, rt.OwnResults)
			}
			if d.Class == adapter.ClassManagement && d.RewrittenBody != nil {
				t.Errorf("%s %s %s: management decision carries a rewritten body", a.Kind(), m, req.Path)
			}
		}
	}
}
