package store

import (
	"errors"
	"fmt"
)

// Errors a backend returns, and that the limiter passes on to its caller
// (package limiter restates each under the same name).
var (
	// ErrUnavailable is matched by *[limiter.UnavailableError]: the store
	// could not be reached or answered with an error. A backend may wrap it
	// in an error it returns to say so.
	ErrUnavailable = errors.New("limiter: backend unavailable")
	// ErrValidation is matched by every *[ValidationError].
	ErrValidation = errors.New("limiter: invalid input")
	// ErrInvalidIdentifier is matched by a *[ValidationError] about an entity
	// ID, parent ID or principal. It also matches [ErrValidation].
	ErrInvalidIdentifier = errors.New("limiter: invalid identifier")
	// ErrInvalidName is matched by a *[ValidationError] about a limit name or
	// resource. It also matches [ErrValidation].
	ErrInvalidName = errors.New("limiter: invalid name")
	// ErrEntityNotFound is matched by *[EntityNotFoundError].
	ErrEntityNotFound = errors.New("limiter: entity not found")
	// ErrEntityExists is matched by *[EntityExistsError].
	ErrEntityExists = errors.New("limiter: entity already exists")
	// ErrUnsupported is returned by [limiter.RateLimiter] methods whose repository
	// lacks the optional ability they need (see [AuditLog], [UsageStore],
	// [CapacityReader]).
	ErrUnsupported = errors.New("limiter: not supported by this repository")
)

// ValidationError reports an invalid input. It matches [ErrValidation] and,
// depending on what was checked, [ErrInvalidIdentifier] or [ErrInvalidName].
type ValidationError struct {
	// Field names the input, e.g. "entity_id", "resource", "name", "limits".
	Field string
	// Value is the offending value, cut to 50 characters plus "..." when
	// longer.
	Value string
	// Reason says what is wrong.
	Reason string

	kind error // ErrValidation, ErrInvalidIdentifier or ErrInvalidName
}

func NewValidationError(kind error, field, value, reason string) *ValidationError {
	if r := []rune(value); len(r) > 50 {
		value = string(r[:50]) + "..."
	}
	return &ValidationError{Field: field, Value: value, Reason: reason, kind: kind}
}

// Error returns "limiter: invalid {field}: {reason}".
func (e *ValidationError) Error() string {
	return fmt.Sprintf("limiter: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrValidation] or the error's specific kind.
func (e *ValidationError) Is(target error) bool {
	return target == ErrValidation || (e.kind != nil && target == e.kind)
}

// EntityNotFoundError reports a missing entity. It matches [ErrEntityNotFound].
type EntityNotFoundError struct{ EntityID string }

// Error returns "limiter: entity not found: {id}".
func (e *EntityNotFoundError) Error() string { return "limiter: entity not found: " + e.EntityID }

// Is reports whether target is [ErrEntityNotFound].
func (e *EntityNotFoundError) Is(target error) bool { return target == ErrEntityNotFound }

// EntityExistsError reports that CreateEntity found the entity already
// stored. It matches [ErrEntityExists].
type EntityExistsError struct{ EntityID string }

// Error returns "limiter: entity already exists: {id}".
func (e *EntityExistsError) Error() string { return "limiter: entity already exists: " + e.EntityID }

// Is reports whether target is [ErrEntityExists].
func (e *EntityExistsError) Is(target error) bool { return target == ErrEntityExists }
