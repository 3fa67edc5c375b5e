package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MinTokenLength is the length below which a token draws a warning.
const MinTokenLength = 32

// MaxTokenLength is the longest token accepted, configured or presented.
const MaxTokenLength = 512

var (
	idPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	groupPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?$`)
	clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$`)
	validScopes  = []string{ScopeRead, ScopeBorrow, ScopeAdmin}
	validKinds   = []string{KindOllama, KindOpenAI, KindComfyUI, KindChatterbox}
	validSources = []string{SourceSession, SourceInputDevices, SourcePrograms}
	validDays    = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
)

// IsB64Token reports whether s uses only RFC 6750's b64token characters.
func IsB64Token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		case c == '=' && i > 0:
			// '=' only as trailing padding.
			for _, r := range s[i:] {
				if r != '=' {
					return false
				}
			}
			return true
		default:
			return false
		}
	}
	return true
}

// Validate reports every problem in c (secrets must already be loaded). Loaded
// configs are always validated; call it directly after changing a Config.
func (c *Config) Validate(opts Options) Problems {
	var ps Problems
	listens := map[string]string{}
	c.validateServer(&ps, listens)
	c.validateAuth(&ps)
	c.validateResources(&ps)
	c.validateUpstreams(&ps, listens)
	c.validateLending(&ps)
	c.validatePresence(&ps)
	c.validateExposure(&ps)
	if opts.goos() == "linux" {
		c.checkSystemdUnits(&ps, opts)
	}
	return ps
}

func (c *Config) validateServer(ps *Problems, listens map[string]string) {
	checkListen(ps, "server.listen", c.Server.Listen, listens)
	if s := c.Server.AdminSocket; s == "" || !strings.HasPrefix(s, "/") {
		ps.errorf("server.admin_socket", "must be an absolute path, got %q", s)
	} else if filepath.Clean(s) != s || strings.HasSuffix(s, "/") {
		ps.errorf("server.admin_socket", "must be a clean absolute path to a file, got %q", s)
	}
	if g := c.Server.AdminGroup; g != "" && !groupPattern.MatchString(g) {
		ps.errorf("server.admin_group", "%q is not a valid group name (empty means root only)", g)
	}
	l := c.Server.Limits
	positiveInt(ps, "server.limits.max_connections", int64(l.MaxConnections))
	positiveInt(ps, "server.limits.max_body_bytes", l.MaxBodyBytes)
	positiveInt(ps, "server.limits.body_budget_bytes", l.BodyBudgetBytes)
	if l.MaxBodyBytes > 0 && l.BodyBudgetBytes > 0 && l.BodyBudgetBytes < l.MaxBodyBytes {
		ps.errorf("server.limits.body_budget_bytes", "must be at least max_body_bytes (%d), got %d", l.MaxBodyBytes, l.BodyBudgetBytes)
	}
	positiveDuration(ps, "server.limits.header_timeout", l.HeaderTimeout)
	positiveDuration(ps, "server.limits.body_timeout", l.BodyTimeout)
	positiveDuration(ps, "server.limits.response_idle_timeout", l.ResponseIdleTimeout)
	positiveDuration(ps, "server.limits.idle_timeout", l.IdleTimeout)
}

func (c *Config) validateAuth(ps *Problems) {
	a := c.Auth
	if !a.TrustLoopback && len(a.Tokens) == 0 {
		ps.errorf("auth.trust_loopback", "false with no [[auth.token]] configured would lock everyone out; add a token first")
	}
	if a.AllowUnauthenticatedRemote {
		if len(a.Tokens) > 0 {
			ps.warnf("auth.allow_unauthenticated_remote", "has no effect: tokens are configured, so every remote request needs one")
		} else {
			ps.warnf("auth.allow_unauthenticated_remote", "any client that can reach the listeners may read the owner's presence and borrow the GPU")
		}
	}
	for i, s := range a.AllowedSources {
		if _, err := ParseSource(s); err != nil {
			ps.errorf(fmt.Sprintf("auth.allowed_sources[%d]", i), "%v", err)
		}
	}
	names := map[string]int{}
	for i, t := range a.Tokens {
		key := fmt.Sprintf("auth.token[%d]", i)
		switch {
		case t.Name == "":
			ps.errorf(key+".name", "is required (it names the token in logs)")
		case strings.ContainsFunc(t.Name, func(r rune) bool { return r < 0x21 || r > 0x7e }):
			ps.errorf(key+".name", "must be printable ASCII without spaces, got %q", t.Name)
		default:
			if j, dup := names[t.Name]; dup {
				ps.errorf(key+".name", "duplicate token name %q (also auth.token[%d])", t.Name, j)
			} else {
				names[t.Name] = i
			}
		}
		if len(t.Scopes) == 0 {
			ps.errorf(key+".scopes", "is required: one or more of %s", strings.Join(validScopes, ", "))
		}
		for j, s := range t.Scopes {
			if !slices.Contains(validScopes, s) {
				ps.errorf(fmt.Sprintf("%s.scopes[%d]", key, j), "unknown scope %q (valid: %s)", s, strings.Join(validScopes, ", "))
			}
		}
		if v := t.Secret.Reveal(); v != "" {
			src := tokenSourceKey(key, t)
			switch {
			case len(v) > MaxTokenLength:
				ps.errorf(src, "token is %d bytes; at most %d", len(v), MaxTokenLength)
			case !IsB64Token(v):
				ps.errorf(src, "token contains characters outside RFC 6750's b64token set (letters, digits, - . _ ~ + / and trailing =); use vacancyd gen-token")
			case len(v) < MinTokenLength:
				ps.warnf(src, "token is only %d characters; use at least %d (vacancyd gen-token makes 43)", len(v), MinTokenLength)
			}
		}
	}
}

func tokenSourceKey(key string, t Token) string {
	switch {
	case t.ValueEnv != "":
		return key + ".value_env"
	case t.ValueFile != "":
		return key + ".value_file"
	}
	return key + ".value"
}

// ParseSource parses an allowed_sources entry: a CIDR prefix or a single address.
func ParseSource(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix such as \"10.0.0.0/8\"", s)
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %q?", s, p.Masked().String())
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR prefix nor an IP address", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (c *Config) validateResources(ps *Problems) {
	seen := map[string]int{}
	for i, r := range c.Resources {
		key := fmt.Sprintf("resource[%d]", i)
		if !idPattern.MatchString(r.ID) {
			ps.errorf(key+".id", "%q is not a valid id (lowercase letters, digits, - and _, starting with a letter or digit)", r.ID)
		} else if j, dup := seen[r.ID]; dup {
			ps.errorf(key+".id", "duplicate resource id %q (also resource[%d])", r.ID, j)
		} else {
			seen[r.ID] = i
		}
		if r.GPUIndex < 0 {
			ps.errorf(key+".gpu_index", "must be 0 or more, got %d", r.GPUIndex)
		}
	}
}

func (c *Config) validateUpstreams(ps *Problems, listens map[string]string) {
	ids := map[string]int{}
	for i, u := range c.Upstreams {
		key := fmt.Sprintf("upstream[%d]", i)
		if !idPattern.MatchString(u.ID) {
			ps.errorf(key+".id", "%q is not a valid id (lowercase letters, digits, - and _, starting with a letter or digit)", u.ID)
		} else if j, dup := ids[u.ID]; dup {
			ps.errorf(key+".id", "duplicate upstream id %q (also upstream[%d])", u.ID, j)
		} else {
			ids[u.ID] = i
		}
		checkListen(ps, key+".listen", u.Listen, listens)
		checkTarget(ps, key+".target", u.Target)
		if !slices.Contains(validKinds, u.Kind) {
			ps.errorf(key+".kind", "unknown kind %q (valid: %s)", u.Kind, strings.Join(validKinds, ", "))
		}
		switch {
		case u.Resource == "":
			ps.errorf(key+".resource", "is required when more than one [[resource]] is configured")
		case !slices.ContainsFunc(c.Resources, func(r Resource) bool { return r.ID == u.Resource }):
			ps.errorf(key+".resource", "names unknown resource %q (configured: %s)", u.Resource, strings.Join(c.resourceIDs(), ", "))
		}
		if u.Management != "deny" && u.Management != "allow" {
			ps.errorf(key+".management", "must be \"deny\" or \"allow\", got %q", u.Management)
		}
		positiveDuration(ps, key+".max_keep_alive", u.MaxKeepAlive)
		if cr := u.Credential; cr != nil {
			if u.ForwardAuthorization {
				ps.errorf(key+".forward_authorization", "cannot be true together with [upstream.credential]: both would set the Authorization header")
			}
			checkCredential(ps, key+".credential", cr)
		}
	}
}

func (c *Config) resourceIDs() []string {
	ids := make([]string, len(c.Resources))
	for i, r := range c.Resources {
		ids[i] = r.ID
	}
	return ids
}

func checkCredential(ps *Problems, key string, cr *Credential) {
	switch cr.Scheme {
	case "bearer":
		if cr.Username != "" {
			ps.errorf(key+".username", "applies only to scheme \"basic\"")
		}
		if v := cr.Secret.Reveal(); v != "" && strings.ContainsFunc(v, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
			ps.errorf(credSourceKey(key, cr), "a bearer credential must be printable ASCII without spaces")
		}
	case "basic":
		if cr.Username == "" {
			ps.errorf(key+".username", "is required for scheme \"basic\"")
		} else if strings.ContainsAny(cr.Username, ":\r\n") {
			ps.errorf(key+".username", "must not contain ':' or line breaks")
		}
		if strings.ContainsAny(cr.Secret.Reveal(), "\r\n") {
			ps.errorf(credSourceKey(key, cr), "a basic password must not contain line breaks")
		}
	default:
		ps.errorf(key+".scheme", "must be \"bearer\" or \"basic\", got %q", cr.Scheme)
	}
}

func credSourceKey(key string, cr *Credential) string {
	if cr.ValueEnv != "" {
		return key + ".value_env"
	}
	return key + ".value_file"
}

func checkListen(ps *Problems, key, addr string, seen map[string]string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		ps.errorf(key, "%q is not host:port (e.g. \"127.0.0.1:9811\")", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		ps.errorf(key, "port %q must be a number from 1 to 65535", port)
		return
	}
	if host != "" && host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			ps.errorf(key, "host %q must be an IP address, \"localhost\" or empty (all addresses)", host)
			return
		}
	}
	norm := normalizeListen(host, port)
	if other, dup := seen[norm]; dup {
		ps.errorf(key, "%q is already used by %s", addr, other)
		return
	}
	seen[norm] = key
}

func normalizeListen(host, port string) string {
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	return net.JoinHostPort(host, port)
}

// IsLoopbackListen reports whether a listen address accepts only loopback peers.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func checkTarget(ps *Problems, key, target string) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		ps.errorf(key, "is not an absolute http or https URL (e.g. \"http://127.0.0.1:11434\")")
		return
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		ps.errorf(key, "scheme %q is not supported; use http or https", u.Scheme)
	}
	if u.User != nil {
		ps.errorf(key, "%s carries credentials in the URL, which is shown in logs and /status; use [upstream.credential] instead", RedactURL(target))
	}
	if u.RawQuery != "" || u.ForceQuery {
		ps.errorf(key, "%s has a query string, which is shown in logs and /status; put credentials in [upstream.credential]", RedactURL(target))
	}
	if u.Fragment != "" {
		ps.errorf(key, "%s has a fragment; remove it", RedactURL(target))
	}
}

// RedactURL returns s with any userinfo and query replaced by ***. Unparseable
// input is replaced entirely.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "***"
	}
	hadUser := u.User != nil
	hadQuery := u.RawQuery != "" || u.ForceQuery
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	frag := ""
	if u.Fragment != "" {
		frag = "#" + u.EscapedFragment()
		u.Fragment, u.RawFragment = "", ""
	}
	out := u.String()
	if hadUser && u.Scheme != "" {
		out = strings.Replace(out, u.Scheme+"://", u.Scheme+"://***@", 1)
	}
	if hadQuery {
		out += "?***"
	}
	return out + frag
}

func (c *Config) validateLending(ps *Problems) {
	l := c.Lending
	positiveDuration(ps, "lending.idle_after", l.IdleAfter)
	nonNegativeDuration(ps, "lending.reclaim_grace", l.ReclaimGrace)
	positiveDuration(ps, "lending.retry_after", l.RetryAfter)
	positiveDuration(ps, "lending.unload_timeout", l.UnloadTimeout)
	nonNegativeDuration(ps, "lending.resume_after", l.ResumeAfter)
	for i, w := range l.Windows {
		key := fmt.Sprintf("lending.window[%d]", i)
		if len(w.Days) == 0 {
			ps.errorf(key+".days", "is required: any of %s", strings.Join(validDays, ", "))
		}
		for j, d := range w.Days {
			if !slices.Contains(validDays, d) {
				ps.errorf(fmt.Sprintf("%s.days[%d]", key, j), "unknown day %q (valid: %s)", d, strings.Join(validDays, ", "))
			}
		}
		for _, f := range []struct{ name, v string }{{"start", w.Start}, {"end", w.End}} {
			if !clockPattern.MatchString(f.v) {
				ps.errorf(key+"."+f.name, "%q is not a time of day \"HH:MM\" from 00:00 to 24:00", f.v)
			}
		}
		if w.Start != "" && w.Start == w.End {
			ps.errorf(key+".end", "equals start; the window would be empty")
		}
	}
}

func (c *Config) validatePresence(ps *Problems) {
	p := &c.Presence
	seen := map[string]bool{}
	for i, s := range p.Sources {
		key := fmt.Sprintf("presence.sources[%d]", i)
		if !slices.Contains(validSources, s) {
			ps.errorf(key, "unknown source %q (valid: %s)", s, strings.Join(validSources, ", "))
		} else if seen[s] {
			ps.errorf(key, "%q is listed twice", s)
		}
		seen[s] = true
	}
	if p.WhenUnknown != "hold" && p.WhenUnknown != "lend" {
		ps.errorf("presence.when_unknown", "must be \"hold\" or \"lend\", got %q", p.WhenUnknown)
	}
	positiveDuration(ps, "presence.session_timeout", p.SessionTimeout)
	if seen[SourceInputDevices] {
		if _, err := filepath.Match(p.InputDevices, "/dev/input/event0"); err != nil || p.InputDevices == "" {
			ps.errorf("presence.input_devices", "%q is not a valid glob pattern", p.InputDevices)
		}
	}
	if seen[SourcePrograms] && len(p.Programs) == 0 {
		ps.errorf("presence.programs", "is empty but sources includes \"programs\"; list the process names that mean the owner is busy")
	}
	for i, name := range p.Programs {
		if name == "" || strings.Contains(name, "/") {
			ps.errorf(fmt.Sprintf("presence.programs[%d]", i), "%q must be a process name without '/'", name)
		}
	}
	p.GPUPressurePath = c.Resolve(p.GPUPressureFile)
	if p.NVML != "auto" && p.NVML != "off" {
		ps.errorf("presence.nvml", "must be \"auto\" or \"off\", got %q", p.NVML)
	}
	if p.GPUMemoryThresholdMiB < 0 {
		ps.errorf("presence.gpu_memory_threshold_mib", "must be 0 or more, got %d", p.GPUMemoryThresholdMiB)
	}
	if p.GPUUtilizationPercent < 0 || p.GPUUtilizationPercent > 100 {
		ps.errorf("presence.gpu_utilization_percent", "must be from 0 to 100, got %d", p.GPUUtilizationPercent)
	}
}

// validateExposure enforces that a listener outside loopback has something to
// authorise its callers, and warns whenever one is reachable from the network.
func (c *Config) validateExposure(ps *Problems) {
	check := func(key, addr string) {
		if addr == "" || IsLoopbackListen(addr) {
			return
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return // reported by checkListen
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "" {
			return // reported by checkListen
		}
		if len(c.Auth.Tokens) == 0 && !c.Auth.AllowUnauthenticatedRemote {
			ps.errorf(key, "%q is reachable from outside loopback but no [[auth.token]] is configured; add a token (vacancyd gen-token) or listen on 127.0.0.1", addr)
			return
		}
		ps.warnf(key, "%q is reachable from outside loopback", addr)
	}
	check("server.listen", c.Server.Listen)
	for i, u := range c.Upstreams {
		check(fmt.Sprintf("upstream[%d].listen", i), u.Listen)
	}
}

func positiveInt(ps *Problems, key string, v int64) {
	if v <= 0 {
		ps.errorf(key, "must be greater than 0, got %d", v)
	}
}

func positiveDuration(ps *Problems, key string, d Duration) {
	if d.err != nil {
		ps.errorf(key, "%v", d.err)
	} else if d.Duration <= 0 {
		ps.errorf(key, "must be greater than 0, got %q", d.String())
	}
}

func nonNegativeDuration(ps *Problems, key string, d Duration) {
	if d.err != nil {
		ps.errorf(key, "%v", d.err)
	} else if d.Duration < 0 {
		ps.errorf(key, "must not be negative, got %q", d.String())
	}
}
