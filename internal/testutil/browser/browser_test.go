package browser

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestEvalFetch proves the harness drives a real browser: a page fetches a
// same-origin resource and the browser reports what it read.
func TestEvalFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/data" {
			fmt.Fprintf(w, "ua=%t", r.Header.Get("User-Agent") != "")
			return
		}
		fmt.Fprint(w, "<html><body>page</body></html>")
	}))
	defer srv.Close()
	ctx := New(t, "")
	got, err := Eval[string](ctx, srv.URL+"/", `fetch("/data").then(r => r.text())`)
	if err != nil {
		t.Fatal(err)
	}
	if got != "ua=true" {
		t.Fatalf("browser read %q", got)
	}
}
