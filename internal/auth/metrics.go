package auth

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcome is the result of one authorization decision, the outcome label of
// vacancyd_auth_total.
type Outcome string

// The outcomes.
const (
	// OutcomeAllowed: the request was admitted.
	OutcomeAllowed Outcome = "allowed"
	// OutcomeMissing: a credential was needed and none was presented (401).
	OutcomeMissing Outcome = "missing"
	// OutcomeInvalid: the presented credential is unknown, malformed or too
	// long (401, error="invalid_token").
	OutcomeInvalid Outcome = "invalid"
	// OutcomeForbidden: the caller lacks the scope and nothing else could grant
	// it (403).
	OutcomeForbidden Outcome = "forbidden"
	// OutcomeNotDirect: a loopback request with a forwarding header, a foreign
	// Host or browser cross-site markers, and no credential (401, or 403 when
	// no token is configured).
	OutcomeNotDirect Outcome = "not_direct"
	// OutcomeMissingIntent: an admin route without X-Vacancyd-Admin: 1 (403).
	OutcomeMissingIntent Outcome = "missing_intent"
	// OutcomeBrowserOrigin: an admin route with an Origin header (403).
	OutcomeBrowserOrigin Outcome = "browser_origin"
	// OutcomeAdministratorRequired: a loopback admin action that loopback
	// trust does not cover on this platform (403).
	OutcomeAdministratorRequired Outcome = "administrator_required"
	// OutcomeSourceNotAllowed: a peer outside allowed_sources (403).
	OutcomeSourceNotAllowed Outcome = "source_not_allowed"
)

// Outcomes lists every outcome, in a stable order.
var Outcomes = []Outcome{
	OutcomeAllowed, OutcomeMissing, OutcomeInvalid, OutcomeForbidden, OutcomeNotDirect,
	OutcomeMissingIntent, OutcomeBrowserOrigin, OutcomeAdministratorRequired, OutcomeSourceNotAllowed,
}

// MetricName is the name of the decision counter.
const MetricName = "vacancyd_auth_total"

// newCounter creates vacancyd_auth_total with every scope and outcome at 0 and
// registers it on reg (when not nil). When reg already holds the counter, as
// when the API and the gates each build an Authenticator on one registry, the
// registered one is shared.
func newCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "Authorization decisions by required scope and outcome.",
	}, []string{"scope", "outcome"})
	if reg != nil {
		if err := reg.Register(cv); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, err
			}
			cv = existing
		}
	}
	for _, s := range allScopes {
		for _, o := range Outcomes {
			cv.WithLabelValues(s.String(), string(o))
		}
	}
	return cv, nil
}
