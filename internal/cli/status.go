package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"

	"sort"
	"strings"
	"time"

	"github.com/vacancyd/vacancyd/internal/api"
	"github.com/vacancyd/vacancyd/internal/config"
)

// EnvToken names the environment variable vacancyd status reads a read
// token from when --token-file is not given.
const EnvToken = "VACANCYD_TOKEN"

func statusFlags(fs *flag.FlagSet) func(context.Context, *env, []string) int {
	path := fs.String("config", "", "configuration file naming the API listener (same search as run)")
	apiURL := fs.String("api", "", "API base URL (default: http://<server.listen>, loopback for a wildcard address)")
	asJSON := fs.Bool("json", false, "print the /status document as JSON")
	tokenFile := fs.String("token-file", "", "file holding a read token (default: $"+EnvToken+"; none on loopback)")
	return func(ctx context.Context, e *env, args []string) int {
		if !noArgs(e, "status", args) {
			return ExitUsage
		}
		base := *apiURL
		if base == "" {
			cfg, _, err := config.LoadSource(config.Locate(*path, e.lookupEnv), config.Options{LookupEnv: e.lookupEnv, UnitFiles: []string{}})
			if err != nil {
				fmt.Fprintf(e.stderr, "vacancyd status: %v\n", err)
				return ExitConfigInvalid
			}
			base = "http://" + dialable(cfg.Server.Listen)
		}
		token, _ := e.lookupEnv(EnvToken)
		if *tokenFile != "" {
			s, err := config.ReadSecretFile(*tokenFile)
			if err != nil {
				fmt.Fprintf(e.stderr, "vacancyd status: %v\n", err)
				return ExitUsage
			}
			token = s.Reveal()
		}
		return showStatus(ctx, e, strings.TrimRight(base, "/"), strings.TrimSpace(token), *asJSON)
	}
}

// dialable turns a listen address into one a local client can dial.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

func showStatus(ctx context.Context, e *env, base, token string, asJSON bool) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "vacancyd status: %v\n", err)
		return ExitUsage
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		fmt.Fprintf(e.stderr, "vacancyd status: cannot reach vacancyd at %s: %v\n", base, err)
		return ExitNoService
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		fmt.Fprintf(e.stderr, "vacancyd status: %v\n", err)
		return ExitNoService
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(e.stderr, "vacancyd status: %s answered %s: %s\n", base, resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			fmt.Fprintf(e.stderr, "vacancyd status: give a read token with --token-file or $%s\n", EnvToken)
			return ExitRefused
		}
		return ExitRuntime
	}
	if asJSON {
		_, _ = e.stdout.Write(body)
		return ExitOK
	}
	var st api.Status
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintf(e.stderr, "vacancyd status: the answer is not a status document: %v\n", err)
		return ExitRuntime
	}
	printStatus(e.stdout, st)
	return ExitOK
}

func printStatus(w io.Writer, st api.Status) {
	fmt.Fprintf(w, "vacancyd %s, up %s\n", st.Version, (time.Duration(st.UptimeS) * time.Second).String())
	if st.Lending.LendingEnabled {
		fmt.Fprintln(w, "lending:  enabled")
	} else {
		by := "an anonymous caller (TCP or token)"
		if p := st.Lending.PausedBy; p != nil && p.Account != "" {
			by = p.Account + " via " + p.Via
		}
		fmt.Fprintf(w, "lending:  PAUSED by %s\n", by)
	}
	ids := make([]string, 0, len(st.Lending.Resources))
	for id := range st.Lending.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		state := "switched on"
		if !st.Lending.Resources[id] {
			state = "switched off"
		}
		verdict := "not lendable"
		if r, ok := st.State.Resources[id]; ok {
			if r.Lendable {
				verdict = "LENT: borrowers may use it"
			} else {
				verdict = "not lent: " + string(r.Reason)
			}
			if r.Pressure.Active {
				verdict += " (" + strings.Join(r.Pressure.Reasons, "; ") + ")"
			}
		}
		fmt.Fprintf(w, "resource: %s %s, %s\n", id, state, verdict)
	}
	printPresence(w, st)
	for _, u := range st.Upstreams {
		fmt.Fprintf(w, "gate:     %s (%s) %s -> %s [%s]\n", u.ID, u.Kind, u.Listen, u.Target, u.Resource)
	}
	if ac := st.AdminChannel; ac != nil {
		if ac.State == "available" {
			fmt.Fprintf(w, "admin:    channel available at %s\n", ac.Path)
		} else {
			fmt.Fprintf(w, "admin:    channel UNAVAILABLE at %s: %s (loopback reading and pausing still work)\n", ac.Path, ac.Reason)
		}
	}
	if st.DebugUntil != nil {
		fmt.Fprintf(w, "debug:    logging at debug level until %s\n", st.DebugUntil.Local().Format(time.RFC3339))
	}
	names := make([]string, 0, len(st.Auth.Tokens))
	for _, t := range st.Auth.Tokens {
		names = append(names, t.Name)
	}
	fmt.Fprintf(w, "auth:     trust_loopback=%t tokens=%d %s\n", st.Auth.TrustLoopback, len(names), strings.Join(names, ","))
}

// printPresence says what vacancyd knows of the owner, its inputs and the
// borrowed work: why lending is on or off.
func printPresence(w io.Writer, st api.Status) {
	p := st.State.Presence
	switch {
	case !p.Known:
		fmt.Fprintln(w, "owner:    unknown (no presence source has reported)")
	case p.Present && len(p.Inhibited) > 0:
		fmt.Fprintf(w, "owner:    present (%s)\n", strings.Join(p.Inhibited, ", "))
	case p.Present:
		fmt.Fprintf(w, "owner:    present, last input %s ago\n", (time.Duration(p.IdleSeconds) * time.Second).String())
	default:
		fmt.Fprintf(w, "owner:    away, idle %s\n", (time.Duration(p.IdleSeconds) * time.Second).String())
	}
	for _, in := range st.State.Inputs {
		if in.Ready {
			fmt.Fprintf(w, "input:    %s ready\n", in.Name)
		} else {
			fmt.Fprintf(w, "input:    %s NOT READY: %s\n", in.Name, in.Reason)
		}
	}
	for _, nr := range st.State.NotReady {
		fmt.Fprintf(w, "ready:    NO: %s\n", nr)
	}
	running, held := 0, 0
	for _, wk := range st.State.Work {
		if wk.State == "held" {
			held++
			fmt.Fprintf(w, "held:     work %d on %s by %s since %s (release with POST /admin/work/%d/release)\n", wk.ID, wk.Upstream, wk.Borrower, wk.HeldSince.Local().Format(time.RFC3339), wk.ID)
		} else {
			running++
		}
	}
	fmt.Fprintf(w, "work:     %d running, %d held\n", running, held)
}
