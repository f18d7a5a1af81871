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

// versionAttrs are the attributes of the version record that are read.
type versionAttrs struct {
	SchemaVersion    sAttr    `dynamodbav:"schema_version"`
	ClientMinVersion sAttr    `dynamodbav:"client_min_version"`
	UpdatedAt        timeAttr `dynamodbav:"updated_at"`
	LambdaVersion    sAttr    `dynamodbav:"lambda_version,nullempty"`
	UpdatedBy        sAttr    `dynamodbav:"updated_by,nullempty"`
	// TemplateVersion is written by other clients' deployments only.
	TemplateVersion sAttr `dynamodbav:"template_version,omitempty"`
}

// versionRecord is the layout of the version record.
type versionRecord struct {
	tableKey
	versionAttrs
	gsi4Key
}

// VersionItem returns the version record item. Empty LambdaVersion and
// UpdatedBy are written as NULL; this library leaves LambdaVersion empty,
// since other clients compare it with the version of their own aggregator
// Lambda.
func VersionItem(v Version) map[string]types.AttributeValue {
	return marshalItem(&versionRecord{
		tableKey: tableKey{PK: PKSystem(ReservedNamespace), SK: SKVersion},
		versionAttrs: versionAttrs{
			SchemaVersion:    sAttr(v.SchemaVersion),
			ClientMinVersion: sAttr(v.ClientMinVersion),
			UpdatedAt:        timeAttr(v.UpdatedAt),
			LambdaVersion:    sAttr(v.LambdaVersion),
			UpdatedBy:        sAttr(v.UpdatedBy),
		},
		gsi4Key: gsi4Key{GSI4PK: ReservedNamespace, GSI4SK: PKSystem(ReservedNamespace)},
	})
}

// VersionFromItem reads the version record; absent attributes read as "".
func VersionFromItem(item map[string]types.AttributeValue) Version {
	var a versionAttrs
	unmarshalItem(item, &a)
	return Version{
		SchemaVersion:    string(a.SchemaVersion),
		ClientMinVersion: string(a.ClientMinVersion),
		LambdaVersion:    string(a.LambdaVersion),
		UpdatedBy:        string(a.UpdatedBy),
		UpdatedAt:        time.Time(a.UpdatedAt),
		TemplateVersion:  string(a.TemplateVersion),
	}
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

// namespaceAttrs are the attributes of a registry record that are read.
type namespaceAttrs struct {
	ID        sAttr     `dynamodbav:"namespace_id"`
	Name      sAttr     `dynamodbav:"namespace_name"`
	Status    sAttr     `dynamodbav:"status"`
	CreatedAt timeAttr  `dynamodbav:"created_at"`
	DeletedAt *timeAttr `dynamodbav:"deleted_at,omitempty"`
}

// namespaceRecord is the layout of a forward or reverse registry record.
type namespaceRecord struct {
	tableKey
	namespaceAttrs
	gsi4Key
}

// namespaceItem returns a registry record with sort key sk, with
// deleted_at when deletedAt is set.
func namespaceItem(sk string, r Namespace, deletedAt time.Time) map[string]types.AttributeValue {
	return marshalItem(&namespaceRecord{
		tableKey: tableKey{PK: PKSystem(ReservedNamespace), SK: sk},
		namespaceAttrs: namespaceAttrs{
			ID:        sAttr(r.ID),
			Name:      sAttr(r.Name),
			Status:    sAttr(r.Status),
			CreatedAt: timeAttr(r.CreatedAt),
			DeletedAt: optTime(deletedAt),
		},
		gsi4Key: gsi4Key{GSI4PK: ReservedNamespace, GSI4SK: PKSystem(ReservedNamespace)},
	})
}

// NamespaceForwardItem returns the name → id record `#NAMESPACE#{name}`.
// DeletedAt is never written on forward records.
func NamespaceForwardItem(r Namespace) map[string]types.AttributeValue {
	return namespaceItem(SKNamespace(r.Name), r, time.Time{})
}

// NamespaceReverseItem returns the id → name record `#NSID#{id}`, with
// deleted_at when DeletedAt is set.
func NamespaceReverseItem(r Namespace) map[string]types.AttributeValue {
	return namespaceItem(SKNSID(r.ID), r, r.DeletedAt)
}

// NamespaceFromItem reads a forward or reverse registry record. Absent
// attributes read as zero values.
func NamespaceFromItem(item map[string]types.AttributeValue) Namespace {
	var a namespaceAttrs
	unmarshalItem(item, &a)
	return Namespace{
		Name:      string(a.Name),
		ID:        string(a.ID),
		Status:    string(a.Status),
		CreatedAt: time.Time(a.CreatedAt),
		DeletedAt: timeOf(a.DeletedAt),
	}
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
