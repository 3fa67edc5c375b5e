package adapter

import (
	"errors"
	"fmt"
	"strings"
)

// Route is one row of a kind's route table.
type Route struct {
	// Method is the upper-case HTTP method. A GET row also matches HEAD.
	Method string
	// Path is an exact path or a pattern: "{name}" segments match one
	// segment each, a final "..." segment matches one or more segments.
	Path string
	// Class is what a request on this route is.
	Class Class
	// OwnResults marks a borrower read that serves results the borrower may
	// see only if it created them through the gate (see Decision.OwnResults).
	OwnResults bool
	// Source says where the route comes from in the real server, so the row
	// can be checked against it ("ollama server/routes.go GenerateRoutes").
	Source string
}

// String renders the row as "METHOD path".
func (r Route) String() string { return r.Method + " " + r.Path }

// rowMethods are the methods a row may name.
var rowMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true,
}

// segment is one compiled path segment.
type segment struct {
	lit   string // literal text when neither param nor rest
	param string // name of a {name} segment
	rest  bool   // the final "..." segment
}

type compiledRoute struct {
	Route
	segs []segment
}

// Table is a compiled route table. It applies the rules shared by every
// kind (see the package documentation) and is safe for concurrent use.
type Table struct {
	kind   string
	routes []Route
	rows   []compiledRoute
}

// NewTable validates and compiles routes for kind. It rejects rows with an
// unsupported method, a malformed pattern, a missing source, the unknown
// class, OwnResults on anything but a borrower read, and duplicate rows.
func NewTable(kind string, routes []Route) (*Table, error) {
	t := &Table{kind: kind, routes: append([]Route(nil), routes...)}
	seen := make(map[string]bool, len(routes))
	var errs []error
	for i, r := range routes {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("route[%d] %s: %s", i, r, fmt.Sprintf(format, args...)))
		}
		if !rowMethods[r.Method] {
			bad("unsupported method")
		}
		if r.Class == ClassUnknown || !r.Class.Valid() {
			bad("class must be inference, borrower_read or management")
		}
		if r.OwnResults && r.Class != ClassBorrowerRead {
			bad("OwnResults is only meaningful on a borrower read")
		}
		if strings.TrimSpace(r.Source) == "" {
			bad("missing source")
		}
		segs, err := compilePattern(r.Path)
		if err != nil {
			bad("%v", err)
		}
		key := r.Method + " " + r.Path
		if seen[key] {
			bad("duplicate row")
		}
		seen[key] = true
		t.rows = append(t.rows, compiledRoute{Route: r, segs: segs})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("adapter %s: %w", kind, errors.Join(errs...))
	}
	return t, nil
}

// MustTable is NewTable for package-level tables; it panics on an error.
func MustTable(kind string, routes []Route) *Table {
	t, err := NewTable(kind, routes)
	if err != nil {
		panic(err)
	}
	return t
}

// Routes returns a copy of the table's rows.
func (t *Table) Routes() []Route { return append([]Route(nil), t.routes...) }

func compilePattern(p string) ([]segment, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, errors.New("path must start with /")
	}
	if p == "/" {
		return nil, nil
	}
	parts := strings.Split(p[1:], "/")
	segs := make([]segment, 0, len(parts))
	params := map[string]bool{}
	for i, part := range parts {
		switch {
		case part == "":
			return nil, errors.New("empty path segment")
		case part == "...":
			if i != len(parts)-1 {
				return nil, errors.New(`"..." must be the last segment`)
			}
			segs = append(segs, segment{rest: true})
		case strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}"):
			name := part[1 : len(part)-1]
			if !isIdent(name) {
				return nil, fmt.Errorf("bad parameter segment %q", part)
			}
			if params[name] {
				return nil, fmt.Errorf("parameter %q repeated", name)
			}
			params[name] = true
			segs = append(segs, segment{param: name})
		case strings.ContainsAny(part, "{}"):
			return nil, fmt.Errorf("braces inside literal segment %q", part)
		case part == "." || part == "..":
			return nil, fmt.Errorf("dot segment %q", part)
		default:
			segs = append(segs, segment{lit: part})
		}
	}
	return segs, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// CanonicalPath reports whether p is a path every router reads the same
// way: it starts with "/", has no empty, "." or ".." segments, and contains
// no backslash, NUL or other control character. A trailing slash other than
// the root is an empty final segment and is not canonical either.
func CanonicalPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
	}
	if p == "/" {
		return true
	}
	for _, s := range strings.Split(p[1:], "/") {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}

// match reports whether the compiled pattern matches the path segments and
// returns its parameters.
func (c *compiledRoute) match(parts []string) (map[string]string, bool) {
	var params map[string]string
	for i, s := range c.segs {
		if s.rest {
			return params, len(parts) > i
		}
		if i >= len(parts) {
			return nil, false
		}
		switch {
		case s.param != "":
			if params == nil {
				params = map[string]string{}
			}
			params[s.param] = parts[i]
		case s.lit != parts[i]:
			return nil, false
		}
	}
	return params, len(parts) == len(c.segs)
}

// Lookup finds the row for method and path under the shared rules and
// returns the route-level decision. Kinds with body rules refine it.
func (t *Table) Lookup(method, path string) Decision {
	if !CanonicalPath(path) {
		return Decision{Class: ClassUnknown, Reason: "path is not canonical"}
	}
	var parts []string
	if path != "/" {
		parts = strings.Split(path[1:], "/")
	}
	var (
		best   *compiledRoute
		params map[string]string
	)
	for i := range t.rows {
		row := &t.rows[i]
		if row.Method != method && !(method == "HEAD" && row.Method == "GET") {
			continue
		}
		p, ok := row.match(parts)
		if !ok {
			continue
		}
		if best == nil || row.Class.restriction() > best.Class.restriction() {
			best, params = row, p
		}
	}
	if best == nil {
		if method == "GET" || method == "HEAD" {
			return Decision{Class: ClassManagement, Reason: "read not listed as a borrower read in the " + t.kind + " table"}
		}
		return Decision{Class: ClassUnknown, Reason: "route not in the " + t.kind + " table"}
	}
	return Decision{
		Class:      best.Class,
		Reason:     "listed route (" + best.Source + ")",
		Pattern:    best.Path,
		Params:     params,
		OwnResults: best.OwnResults,
	}
}

// Classify applies Lookup to a request; kinds without body rules use it as
// their whole Classify.
func (t *Table) Classify(r *Request) Decision {
	if r == nil {
		return Decision{Class: ClassUnknown, Reason: "no request"}
	}
	return t.Lookup(r.Method, r.Path)
}
