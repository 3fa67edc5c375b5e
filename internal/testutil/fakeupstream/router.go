package fakeupstream

import (
	"net/http"
	"strings"
)

// router dispatches on method and path the way the faked server does: a
// pattern segment "{name}" matches one segment (its value is the request's
// path value name); a path that matches no pattern gets notFound, one that
// matches only with other methods gets notAllowed.
type router struct {
	routes []route
	// autoHead answers HEAD with the GET handler (cpp-httplib, aiohttp).
	autoHead   bool
	notFound   http.HandlerFunc
	notAllowed http.HandlerFunc
}

type route struct {
	method string
	segs   []string
	h      http.HandlerFunc
}

func (rt *router) handle(method, pattern string, h http.HandlerFunc) {
	rt.routes = append(rt.routes, route{method: method, segs: splitPath(pattern), h: h})
}

func splitPath(p string) []string {
	if p == "/" {
		return []string{""}
	}
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	segs := splitPath(r.URL.Path)
	pathMatched := false
	for _, method := range []string{r.Method, "HEAD-AS-GET"} {
		want := method
		if method == "HEAD-AS-GET" {
			if !rt.autoHead || r.Method != http.MethodHead {
				break
			}
			want = http.MethodGet
		}
		for _, ro := range rt.routes {
			vals, ok := matchSegs(ro.segs, segs)
			if !ok {
				continue
			}
			pathMatched = true
			if ro.method != want {
				continue
			}
			for k, v := range vals {
				r.SetPathValue(k, v)
			}
			ro.h(w, r)
			return
		}
	}
	if pathMatched && rt.notAllowed != nil {
		rt.notAllowed(w, r)
		return
	}
	rt.notFound(w, r)
}

func matchSegs(pat, segs []string) (map[string]string, bool) {
	if len(pat) != len(segs) {
		return nil, false
	}
	var vals map[string]string
	for i, p := range pat {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return nil, false
			}
			if vals == nil {
				vals = map[string]string{}
			}
			vals[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return vals, true
}
