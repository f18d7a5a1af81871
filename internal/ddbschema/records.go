package ddbschema

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------------------
// Version record: PK _/SYSTEM#, SK #VERSION.

// Version is the table-level version record.
type Version struct {
	SchemaVersion    string
	ClientMinVersion string
	// LambdaVersion and UpdatedBy are "" when stored as NULL or absent.
	LambdaVersion string
	UpdatedBy     string
	UpdatedAt     time.Time
	// TemplateVersion is read when present; it is never written.
	TemplateVersion string
}

// VersionItem returns the version record item. Empty LambdaVersion and
// UpdatedBy are written as NULL; a Go client leaves LambdaVersion empty,
// since it deploys no Python Lambda.
func VersionItem(v Version) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK:               S(PKSystem(ReservedNamespace)),
		AttrSK:               S(SKVersion),
		AttrSchemaVersion:    S(v.SchemaVersion),
		AttrClientMinVersion: S(v.ClientMinVersion),
		AttrUpdatedAt:        S(FormatISOSeconds(v.UpdatedAt)),
		AttrLambdaVersion:    SOrNull(v.LambdaVersion),
		AttrUpdatedBy:        SOrNull(v.UpdatedBy),
		AttrGSI4PK:           S(ReservedNamespace),
		AttrGSI4SK:           S(PKSystem(ReservedNamespace)),
	}
}

// VersionFromItem reads the version record; absent attributes read as "".
func VersionFromItem(item map[string]types.AttributeValue) Version {
	var v Version
	v.SchemaVersion, _ = GetS(item, AttrSchemaVersion)
	v.ClientMinVersion, _ = GetS(item, AttrClientMinVersion)
	v.LambdaVersion, _ = GetS(item, AttrLambdaVersion)
	v.UpdatedBy, _ = GetS(item, AttrUpdatedBy)
	v.TemplateVersion, _ = GetS(item, AttrTemplateVersion)
	v.UpdatedAt = GetTime(item, AttrUpdatedAt)
	return v
}

// ---------------------------------------------------------------------------
// Namespace registry: PK _/SYSTEM#, forward SK #NAMESPACE#{name}, reverse
// SK #NSID#{id}.

// Namespace record statuses. Forward records are only ever active.
const (
	NamespaceActive  = "active"
	NamespaceDeleted = "deleted"
	NamespacePurging = "purging"
)

// Namespace is a forward or reverse namespace registry record.
type Namespace struct {
	Name      string
	ID        string
	Status    string // NamespaceActive, NamespaceDeleted, NamespacePurging; "" if absent
	CreatedAt time.Time
	// DeletedAt is set on reverse records of deleted namespaces (zero
	// otherwise).
	DeletedAt time.Time
}

// namespaceItem returns a registry record with sort key sk.
func namespaceItem(sk string, r Namespace) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK:            S(PKSystem(ReservedNamespace)),
		AttrSK:            S(sk),
		AttrNamespaceID:   S(r.ID),
		AttrNamespaceName: S(r.Name),
		AttrStatus:        S(r.Status),
		AttrCreatedAt:     S(FormatISOSeconds(r.CreatedAt)),
		AttrGSI4PK:        S(ReservedNamespace),
		AttrGSI4SK:        S(PKSystem(ReservedNamespace)),
	}
}

// NamespaceForwardItem returns the name → id record `#NAMESPACE#{name}`.
// DeletedAt is never written on forward records.
func NamespaceForwardItem(r Namespace) map[string]types.AttributeValue {
	return namespaceItem(SKNamespace(r.Name), r)
}

// NamespaceReverseItem returns the id → name record `#NSID#{id}`, with
// deleted_at when DeletedAt is set.
func NamespaceReverseItem(r Namespace) map[string]types.AttributeValue {
	item := namespaceItem(SKNSID(r.ID), r)
	if !r.DeletedAt.IsZero() {
		item[AttrDeletedAt] = S(FormatISOSeconds(r.DeletedAt))
	}
	return item
}

// NamespaceFromItem reads a forward or reverse registry record. Absent
// attributes read as zero values.
func NamespaceFromItem(item map[string]types.AttributeValue) Namespace {
	var r Namespace
	r.ID, _ = GetS(item, AttrNamespaceID)
	r.Name, _ = GetS(item, AttrNamespaceName)
	r.Status, _ = GetS(item, AttrStatus)
	r.CreatedAt = GetTime(item, AttrCreatedAt)
	r.DeletedAt = GetTime(item, AttrDeletedAt)
	return r
}

// namespaceIDAttempts bounds the rejection loop of NewNamespaceID, so a
// broken reader cannot spin forever. With random bytes an id is rejected
// with probability 1/64.
const namespaceIDAttempts = 100

// NewNamespaceID returns a fresh opaque namespace id: 8 bytes from r (nil
// means crypto/rand) encoded as unpadded URL-safe base64, 11 characters of
// [A-Za-z0-9_-]. Ids starting with '-' are regenerated (they would read as
// command-line flags).
func NewNamespaceID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [8]byte
	for range namespaceIDAttempts {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("generate namespace id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id, nil
		}
	}
	return "", errors.New("generate namespace id: random source keeps producing ids starting with '-'")
}
