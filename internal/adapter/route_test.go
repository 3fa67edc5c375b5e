package adapter

import (
	"maps"
	"strings"
	"testing"
	"time"
)

var testRoutes = []Route{
	{Method: "GET", Path: "/", Class: ClassBorrowerRead, Source: "t"},
	{Method: "GET", Path: "/api/tags", Class: ClassBorrowerRead, Source: "t"},
	{Method: "POST", Path: "/api/generate", Class: ClassInference, Source: "t"},
	{Method: "GET", Path: "/history/{prompt_id}", Class: ClassBorrowerRead, OwnResults: true, Source: "t"},
	{Method: "POST", Path: "/slots/{id}/{action}", Class: ClassManagement, Source: "t"},
	{Method: "GET", Path: "/userdata/...", Class: ClassManagement, Source: "t"},
	{Method: "GET", Path: "/overlap/{x}", Class: ClassBorrowerRead, Source: "t"},
	{Method: "GET", Path: "/overlap/secret", Class: ClassManagement, Source: "t"},
	{Method: "HEAD", Path: "/only-head", Class: ClassBorrowerRead, Source: "t"},
}

func TestLookupRules(t *testing.T) {
	tab := MustTable("test", testRoutes)
	cases := []struct {
		method, path string
		class        Class
		pattern      string
		params       map[string]string
		own          bool
	}{
		// listed rows
		{"GET", "/", ClassBorrowerRead, "/", nil, false},
		{"GET", "/api/tags", ClassBorrowerRead, "/api/tags", nil, false},
		{"POST", "/api/generate", ClassInference, "/api/generate", nil, false},
		{"GET", "/history/abc-1", ClassBorrowerRead, "/history/{prompt_id}", map[string]string{"prompt_id": "abc-1"}, true},
		{"POST", "/slots/3/save", ClassManagement, "/slots/{id}/{action}", map[string]string{"id": "3", "action": "save"}, false},
		{"GET", "/userdata/a", ClassManagement, "/userdata/...", nil, false},
		{"GET", "/userdata/workflows/a.json", ClassManagement, "/userdata/...", nil, false},
		// HEAD is served by GET rows; a HEAD row does not serve GET
		{"HEAD", "/api/tags", ClassBorrowerRead, "/api/tags", nil, false},
		{"HEAD", "/only-head", ClassBorrowerRead, "/only-head", nil, false},
		{"GET", "/only-head", ClassManagement, "", nil, false},
		// the most restrictive of overlapping rows wins
		{"GET", "/overlap/secret", ClassManagement, "/overlap/secret", nil, false},
		{"GET", "/overlap/other", ClassBorrowerRead, "/overlap/{x}", map[string]string{"x": "other"}, false},
		// an unlisted read is management, anything else unlisted is unknown
		{"GET", "/api/ps", ClassManagement, "", nil, false},
		{"HEAD", "/api/ps", ClassManagement, "", nil, false},
		{"POST", "/api/pull", ClassUnknown, "", nil, false},
		{"DELETE", "/api/tags", ClassUnknown, "", nil, false},
		{"OPTIONS", "/api/tags", ClassUnknown, "", nil, false},
		{"get", "/api/tags", ClassUnknown, "", nil, false},
		// patterns need their segments
		{"GET", "/history", ClassManagement, "", nil, false},
		{"GET", "/history/a/b", ClassManagement, "", nil, false},
		{"GET", "/userdata", ClassManagement, "", nil, false},
		{"POST", "/slots/3", ClassUnknown, "", nil, false},
		// matching is exact: case and trailing slashes matter
		{"GET", "/API/tags", ClassManagement, "", nil, false},
		{"POST", "/api/Generate", ClassUnknown, "", nil, false},
		// non-canonical paths are unknown whatever the method
		{"GET", "/api/tags/", ClassUnknown, "", nil, false},
		{"POST", "/api/generate/", ClassUnknown, "", nil, false},
		{"GET", "//api/tags", ClassUnknown, "", nil, false},
		{"GET", "/api/./tags", ClassUnknown, "", nil, false},
		{"GET", "/api/../api/tags", ClassUnknown, "", nil, false},
		{"GET", "/api\\tags", ClassUnknown, "", nil, false},
		{"GET", "/api/tags\x00", ClassUnknown, "", nil, false},
		{"GET", "", ClassUnknown, "", nil, false},
		{"GET", "api/tags", ClassUnknown, "", nil, false},
	}
	for _, c := range cases {
		d := tab.Lookup(c.method, c.path)
		if d.Class != c.class || d.Pattern != c.pattern || d.OwnResults != c.own || !maps.Equal(d.Params, c.params) {
			t.Errorf("%s %q: got %s %q %v own=%v (%s); want %s %q %v own=%v",
				c.method, c.path, d.Class, d.Pattern, d.Params, d.OwnResults, d.Reason, c.class, c.pattern, c.params, c.own)
		}
		if d.Reason == "" {
			t.Errorf("%s %q: empty reason", c.method, c.path)
		}
	}
}

func TestClassifyNilRequest(t *testing.T) {
	if d := MustTable("test", testRoutes).Classify(nil); d.Class != ClassUnknown {
		t.Fatalf("nil request: %s", d.Class)
	}
}

func TestNewTableRejectsBadRows(t *testing.T) {
	ok := Route{Method: "GET", Path: "/a", Class: ClassBorrowerRead, Source: "s"}
	bad := map[string]Route{
		"method":          {Method: "get", Path: "/a", Class: ClassBorrowerRead, Source: "s"},
		"unknown class":   {Method: "GET", Path: "/a", Class: ClassUnknown, Source: "s"},
		"invalid class":   {Method: "GET", Path: "/a", Class: Class(9), Source: "s"},
		"no source":       {Method: "GET", Path: "/a", Class: ClassBorrowerRead},
		"relative":        {Method: "GET", Path: "a", Class: ClassBorrowerRead, Source: "s"},
		"empty segment":   {Method: "GET", Path: "/a//b", Class: ClassBorrowerRead, Source: "s"},
		"trailing slash":  {Method: "GET", Path: "/a/", Class: ClassBorrowerRead, Source: "s"},
		"rest not last":   {Method: "GET", Path: "/a/.../b", Class: ClassBorrowerRead, Source: "s"},
		"bad param":       {Method: "GET", Path: "/a/{1x}", Class: ClassBorrowerRead, Source: "s"},
		"repeated param":  {Method: "GET", Path: "/a/{x}/{x}", Class: ClassBorrowerRead, Source: "s"},
		"brace literal":   {Method: "GET", Path: "/a/x{y}", Class: ClassBorrowerRead, Source: "s"},
		"dot segment":     {Method: "GET", Path: "/a/../b", Class: ClassBorrowerRead, Source: "s"},
		"own on non-read": {Method: "POST", Path: "/a", Class: ClassInference, OwnResults: true, Source: "s"},
	}
	for name, r := range bad {
		if _, err := NewTable("test", []Route{ok, r}); err == nil {
			t.Errorf("%s: %s accepted", name, r)
		} else if !strings.Contains(err.Error(), "route[1]") {
			t.Errorf("%s: error %q does not name the row", name, err)
		}
	}
	if _, err := NewTable("test", []Route{ok, ok}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate row: %v", err)
	}
	if _, err := NewTable("test", []Route{ok}); err != nil {
		t.Errorf("good row rejected: %v", err)
	}
}

func TestTableRoutesIsACopy(t *testing.T) {
	tab := MustTable("test", testRoutes)
	rs := tab.Routes()
	rs[0].Class = ClassManagement
	if tab.Routes()[0].Class != ClassBorrowerRead {
		t.Fatal("Routes exposes the table's own slice")
	}
}

func TestClassStrings(t *testing.T) {
	want := map[Class]string{
		ClassUnknown: "unknown", ClassInference: "inference",
		ClassBorrowerRead: "borrower_read", ClassManagement: "management", Class(7): "Class(7)",
	}
	for c, s := range want {
		if c.String() != s {
			t.Errorf("%d: %q, want %q", c, c.String(), s)
		}
		if b, _ := c.MarshalText(); string(b) != s {
			t.Errorf("%d: MarshalText %q", c, b)
		}
	}
	if Class(4).Valid() || !ClassManagement.Valid() {
		t.Error("Valid")
	}
	// The values are part of logs and persisted decisions: they must not move.
	if ClassUnknown != 0 || ClassInference != 1 || ClassBorrowerRead != 2 || ClassManagement != 3 {
		t.Error("class values changed")
	}
}

func TestKeepAliveCap(t *testing.T) {
	if d, err := (Options{}).KeepAliveCap(); err != nil || d != DefaultMaxKeepAlive {
		t.Errorf("zero: %v %v", d, err)
	}
	if d, err := (Options{MaxKeepAlive: time.Minute}).KeepAliveCap(); err != nil || d != time.Minute {
		t.Errorf("1m: %v %v", d, err)
	}
	if _, err := (Options{MaxKeepAlive: -time.Second}).KeepAliveCap(); err == nil {
		t.Error("negative cap accepted")
	}
}

func TestRegisterPanics(t *testing.T) {
	t.Cleanup(func() {
		registryMu.Lock()
		delete(registry, "x-dup")
		registryMu.Unlock()
	})
	for name, f := range map[string]func(){
		"empty kind":  func() { Register("", func(Options) (Adapter, error) { return nil, nil }) },
		"nil factory": func() { Register("x-nil", nil) },
		"duplicate": func() {
			f := func(Options) (Adapter, error) { return nil, nil }
			Register("x-dup", f)
			Register("x-dup", f)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestCanonicalPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/a": true, "/a/b.c": true, "/a/%2F": true, "/a/ü": true, "/a/...": true,
		"": false, "a": false, "/a/": false, "//": false, "/a//b": false, "/./a": false,
		"/a/..": false, "/a\\b": false, "/a\tb": false, "/a\x7f": false,
	} {
		if got := CanonicalPath(p); got != want {
			t.Errorf("CanonicalPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzLookup checks the shared rules on arbitrary methods and paths: no
// panic, a valid class, unknown for non-canonical paths, management or
// unknown (by method) when no row matches, and parameters that are real
// segments of the path.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"/", "/api/tags", "/history/x", "/userdata/a/b", "/a//b", "/a/../b", "/overlap/secret", "/slots/1/x"} {
		f.Add("GET", s)
		f.Add("POST", s)
	}
	tab := MustTable("test", testRoutes)
	f.Fuzz(func(t *testing.T, method, path string) {
		d := tab.Lookup(method, path)
		if !d.Class.Valid() {
			t.Fatalf("invalid class %d", d.Class)
		}
		if !CanonicalPath(path) && d.Class != ClassUnknown {
			t.Fatalf("non-canonical %q got %s", path, d.Class)
		}
		if d.Pattern == "" && CanonicalPath(path) {
			want := ClassUnknown
			if method == "GET" || method == "HEAD" {
				want = ClassManagement
			}
			if d.Class != want {
				t.Fatalf("unlisted %s %q got %s", method, path, d.Class)
			}
		}
		if d.OwnResults && d.Class != ClassBorrowerRead {
			t.Fatalf("own results on %s", d.Class)
		}
		segs := strings.Split(path, "/")
		for name, v := range d.Params {
			if v == "" || !strings.Contains(d.Pattern, "{"+name+"}") {
				t.Fatalf("param %s=%q for pattern %q", name, v, d.Pattern)
			}
			found := false
			for _, s := range segs {
				found = found || s == v
			}
			if !found {
				t.Fatalf("param %s=%q is not a segment of %q", name, v, path)
			}
		}
	})
}
