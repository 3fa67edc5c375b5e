package config

import (
	"fmt"
	"strings"
)

// Problem is one finding about a configuration, at its key path.
type Problem struct {
	Key     string
	Message string
	Warning bool
}

func (p Problem) String() string {
	if p.Warning {
		return "warning: " + p.Key + ": " + p.Message
	}
	return p.Key + ": " + p.Message
}

// Problems is a list of findings.
type Problems []Problem

func (ps *Problems) errorf(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

func (ps *Problems) warnf(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...), Warning: true})
}

// Errors returns the problems that are not warnings.
func (ps Problems) Errors() Problems { return ps.filter(false) }

// Warnings returns the problems that are warnings.
func (ps Problems) Warnings() Problems { return ps.filter(true) }

func (ps Problems) filter(warning bool) Problems {
	var out Problems
	for _, p := range ps {
		if p.Warning == warning {
			out = append(out, p)
		}
	}
	return out
}

// Err returns an *InvalidError when any problem is an error, else nil.
func (ps Problems) Err() error {
	if errs := ps.Errors(); len(errs) > 0 {
		return &InvalidError{Problems: errs}
	}
	return nil
}

// InvalidError is a configuration that must not be used. It lists every error.
type InvalidError struct {
	Problems Problems
}

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid configuration:\n" + strings.Join(lines, "\n")
}
