package adapter

import "fmt"

// Class is what a request is to the lending machinery. The zero value is
// ClassUnknown, so a Decision nobody filled in refuses.
type Class uint8

const (
	// ClassUnknown is a request no table row admits: refused (refused_route).
	ClassUnknown Class = 0
	// ClassInference uses the GPU: admitted only while the resource is lent.
	ClassInference Class = 1
	// ClassBorrowerRead is model discovery, health or a client's own results:
	// allowed to any authenticated borrower, lending or not.
	ClassBorrowerRead Class = 2
	// ClassManagement administers the upstream or reads the owner's use of it:
	// refused (management_denied) unless the upstream sets management = "allow".
	ClassManagement Class = 3
)

// String returns the class as it appears in logs and metrics labels.
func (c Class) String() string {
	switch c {
	case ClassUnknown:
		return "unknown"
	case ClassInference:
		return "inference"
	case ClassBorrowerRead:
		return "borrower_read"
	case ClassManagement:
		return "management"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// MarshalText encodes the class as its String form (JSON, slog).
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Valid reports whether c is one of the four defined classes.
func (c Class) Valid() bool { return c <= ClassManagement }

// restriction orders classes for overlapping rows: a higher value wins.
func (c Class) restriction() int {
	switch c {
	case ClassBorrowerRead:
		return 1
	case ClassInference:
		return 2
	case ClassManagement:
		return 3
	}
	return 4 // unknown and invalid values are the most restrictive of all
}
