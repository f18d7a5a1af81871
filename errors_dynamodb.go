// Layer 1, math and models: the errors of the DynamoDB backend (its
// table, its schema version, its permissions, its namespaces), which the
// other backends never return, and how the AWS SDK's errors read.

package limiter

import (
	"errors"
	"fmt"
	"net/url"
)

// AccessDeniedError is returned by Acquire, AcquireAll and Wait when the
// backend refused the call for want of permission (DynamoDB's
// AccessDeniedException: the caller's IAM policy does not grant the action
// on the item, e.g. a principal confined to one namespace tried another's).
// It is not an outage: the on-unavailable mode does not apply, so even
// under "allow" nothing is admitted. It matches [ErrAccessDenied] and
// unwraps to the cause.
type AccessDeniedError struct {
	Cause    error
	Table    string
	EntityID string
	Resource string
}

// Error returns the cause's message followed by the context.
func (e *AccessDeniedError) Error() string {
	u := UnavailableError{Cause: e.Cause, Table: e.Table, EntityID: e.EntityID, Resource: e.Resource}
	return "access denied: " + u.Error()
}

// Is reports whether target is [ErrAccessDenied].
func (e *AccessDeniedError) Is(target error) bool { return target == ErrAccessDenied }

// Unwrap returns the cause.
func (e *AccessDeniedError) Unwrap() error { return e.Cause }

// TableNotFoundError is returned by [OpenDynamoDB] and
// [DynamoDBRepository.Ping] when the table does not exist. It matches
// [ErrTableNotFound] and unwraps to DynamoDB's ResourceNotFoundException.
type TableNotFoundError struct {
	Table string
	// Endpoint is where the table was looked for ("" when unknown).
	Endpoint string
	Cause    error
}

// Error names the table, where it was looked for, and how to create it.
func (e *TableNotFoundError) Error() string {
	at := ""
	if e.Endpoint != "" {
		at = " at " + e.Endpoint
	}
	return fmt.Sprintf("limiter: table %q not found%s: create it with `zae-limiter deploy --name %s` (AWS), "+
		"`zae-limiter local up --name %s` (DynamoDB Local), or open it with DynamoDBOptions.CreateTable set",
		e.Table, at, e.Table, e.Table)
}

// Is reports whether target is [ErrTableNotFound].
func (e *TableNotFoundError) Is(target error) bool { return target == ErrTableNotFound }

// Unwrap returns the cause.
func (e *TableNotFoundError) Unwrap() error { return e.Cause }

// VersionMismatchError reports a client/schema/Lambda version mismatch that
// needs an update. It matches [ErrVersion].
type VersionMismatchError struct {
	ClientVersion string
	SchemaVersion string
	LambdaVersion string // "" when unknown
	Message       string
	CanAutoUpdate bool
}

// Error returns "limiter: version mismatch: client …, schema …, lambda …:
// {message}".
func (e *VersionMismatchError) Error() string {
	lambda := e.LambdaVersion
	if lambda == "" {
		lambda = "unknown"
	}
	return fmt.Sprintf("limiter: version mismatch: client %s, schema %s, lambda %s: %s",
		e.ClientVersion, e.SchemaVersion, lambda, e.Message)
}

// Is reports whether target is [ErrVersion].
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersion }

// IncompatibleSchemaError reports a table whose schema major version differs
// from the client's. It matches [ErrIncompatibleSchema] and [ErrVersion].
type IncompatibleSchemaError struct {
	ClientVersion     string
	SchemaVersion     string
	Message           string
	MigrationGuideURL string
}

// Error returns "limiter: incompatible schema: client … does not support
// schema …: {message}" and the migration guide, if any.
func (e *IncompatibleSchemaError) Error() string {
	msg := fmt.Sprintf("limiter: incompatible schema: client %s does not support schema %s: %s",
		e.ClientVersion, e.SchemaVersion, e.Message)
	if e.MigrationGuideURL != "" {
		msg += " (see " + e.MigrationGuideURL + ")"
	}
	return msg
}

// Is reports whether target is [ErrIncompatibleSchema] or [ErrVersion].
func (e *IncompatibleSchemaError) Is(target error) bool {
	return target == ErrIncompatibleSchema || target == ErrVersion
}

// sdkMessage returns an AWS SDK error as its user reads it, "limiter:
// DynamoDB {operation}: {code}: {message}", or with the transport's error
// when no answer came ("dial tcp ...: connection refused"), without the
// steps that wrapped it; ok is false for an error that is not the SDK's.
// The SDK's types are matched by their methods, so that no SDK import is
// needed.
func sdkMessage(err error) (msg string, ok bool) {
	var op interface {
		Service() string
		Operation() string
	}
	if !errors.As(err, &op) {
		return "", false
	}
	return "limiter: " + op.Service() + " " + op.Operation() + ": " + sdkReason(err), true
}

// sdkReason returns why an AWS SDK call failed: the service's error code
// and message, else the transport's error, else the innermost error.
func sdkReason(err error) string {
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	var ue *url.Error
	switch {
	case errors.As(err, &api):
		if m := api.ErrorMessage(); m != "" {
			return api.ErrorCode() + ": " + m
		}
		return api.ErrorCode()
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	for next := errors.Unwrap(err); next != nil; next = errors.Unwrap(err) {
		err = next
	}
	return err.Error()
}

// NamespaceNotFoundError reports an unregistered (or deleted) namespace,
// looked up by name, or a namespace id without a registry record. It matches
// [ErrNamespaceNotFound].
type NamespaceNotFoundError struct {
	// Namespace is the name looked up; "" when the lookup was by id.
	Namespace string
	// ID is the namespace id looked up (RecoverNamespace); "" when the
	// lookup was by name.
	ID string
}

// Error returns "limiter: namespace "{name}" not found (register it
// first)", or "limiter: namespace id "{id}" not found" for a lookup by id.
func (e *NamespaceNotFoundError) Error() string {
	if e.Namespace == "" && e.ID != "" {
		return fmt.Sprintf("limiter: namespace id %q not found", e.ID)
	}
	return fmt.Sprintf("limiter: namespace %q not found (register it first)", e.Namespace)
}

// Is reports whether target is [ErrNamespaceNotFound].
func (e *NamespaceNotFoundError) Is(target error) bool { return target == ErrNamespaceNotFound }

// NamespaceStateError reports a namespace operation refused in the
// namespace's current state (recover an active one, purge an active one, ...).
// It matches [ErrNamespaceState].
type NamespaceStateError struct {
	Namespace string
	State     string
	Message   string
}

// Error returns "limiter: {message}".
func (e *NamespaceStateError) Error() string { return "limiter: " + e.Message }

// Is reports whether target is [ErrNamespaceState].
func (e *NamespaceStateError) Is(target error) bool { return target == ErrNamespaceState }
