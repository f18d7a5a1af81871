package ddbschema

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 25, 12, 0, 1, 0, time.UTC)
	v := Version{SchemaVersion: "0.10.0", ClientMinVersion: "0.0.0", UpdatedBy: "client:0.1.0", UpdatedAt: at}
	item := VersionItem(v)
	checkItem(t, "version record", item, map[string]string{
		"PK":                 `S:"_/SYSTEM#"`,
		"SK":                 `S:"#VERSION"`,
		"schema_version":     `S:"0.10.0"`,
		"client_min_version": `S:"0.0.0"`,
		"updated_at":         `S:"2026-06-25T12:00:01Z"`,
		"lambda_version":     `NULL:true`,
		"updated_by":         `S:"client:0.1.0"`,
		"GSI4PK":             `S:"_"`,
		"GSI4SK":             `S:"_/SYSTEM#"`,
	})
	assert.Equal(t, v, VersionFromItem(item), "version round trip")
	item[AttrTemplateVersion] = S("0.9.0")
	item[AttrLambdaVersion] = S("0.10.3")
	got := VersionFromItem(item)
	assert.Equal(t, "0.9.0", got.TemplateVersion, "VersionFromItem = %+v", got)
	assert.Equal(t, "0.10.3", got.LambdaVersion, "VersionFromItem = %+v", got)
}

func TestNamespaceRecords(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	r := Namespace{Name: "tenant-a", ID: "E9P6iV0e9iQ", Status: NamespaceActive, CreatedAt: created}
	fwd := NamespaceForwardItem(r)
	checkItem(t, "forward", fwd, map[string]string{
		"PK":             `S:"_/SYSTEM#"`,
		"SK":             `S:"#NAMESPACE#tenant-a"`,
		"namespace_id":   `S:"E9P6iV0e9iQ"`,
		"namespace_name": `S:"tenant-a"`,
		"status":         `S:"active"`,
		"created_at":     `S:"2026-03-01T08:00:00Z"`,
		"GSI4PK":         `S:"_"`,
		"GSI4SK":         `S:"_/SYSTEM#"`,
	})
	deleted := r
	deleted.Status = NamespaceDeleted
	deleted.DeletedAt = created.Add(time.Hour)
	rev := NamespaceReverseItem(deleted)
	checkItem(t, "reverse", rev, map[string]string{
		"PK":             `S:"_/SYSTEM#"`,
		"SK":             `S:"#NSID#E9P6iV0e9iQ"`,
		"namespace_id":   `S:"E9P6iV0e9iQ"`,
		"namespace_name": `S:"tenant-a"`,
		"status":         `S:"deleted"`,
		"created_at":     `S:"2026-03-01T08:00:00Z"`,
		"deleted_at":     `S:"2026-03-01T09:00:00Z"`,
		"GSI4PK":         `S:"_"`,
		"GSI4SK":         `S:"_/SYSTEM#"`,
	})
	_, ok := NamespaceReverseItem(r)[AttrDeletedAt]
	assert.False(t, ok, "active reverse record has deleted_at")
	assert.Equal(t, r, NamespaceFromItem(fwd), "forward round trip")
	assert.Equal(t, deleted, NamespaceFromItem(rev), "reverse round trip")
}

// repeatReader returns b forever.
type repeatReader struct{ b byte }

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.b
	}
	return len(p), nil
}

func TestNewNamespaceID(t *testing.T) {
	t.Parallel()
	alphabet := regexp.MustCompile(`\A[A-Za-z0-9_-]{11}\z`)
	seen := map[string]bool{}
	for range 200 {
		id, err := NewNamespaceID(nil)
		require.NoError(t, err)
		require.True(t, alphabet.MatchString(id), "NewNamespaceID() = %q, want 11 chars of [A-Za-z0-9_-] not starting with '-'", id)
		require.NotEqualValues(t, '-', id[0], "NewNamespaceID() = %q, want 11 chars of [A-Za-z0-9_-] not starting with '-'", id)
		seen[id] = true
	}
	assert.GreaterOrEqual(t, len(seen), 200, "NewNamespaceID produced duplicates: %d distinct of 200", len(seen))

	// The first 8 bytes encode to "-AAAAAAAAAA" and must be rejected.
	src := bytes.NewReader([]byte{0xF8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	id, err := NewNamespaceID(src)
	require.NoError(t, err, "NewNamespaceID(leading '-' first) = %q; want AAECAwQFBgc", id)
	assert.Equal(t, "AAECAwQFBgc", id, "NewNamespaceID(leading '-' first) = %q; want AAECAwQFBgc", id)
	// Ids may start with '_'.
	id, err = NewNamespaceID(repeatReader{0xFC})
	require.NoError(t, err, "NewNamespaceID(0xFC...) = %q; want leading '_'", id)
	assert.EqualValues(t, '_', id[0], "NewNamespaceID(0xFC...) = %q; want leading '_'", id)
	_, err = NewNamespaceID(repeatReader{0xF8})
	assert.Error(t, err, "NewNamespaceID(always '-') succeeded, want error")
	_, err = NewNamespaceID(bytes.NewReader([]byte{1, 2, 3}))
	assert.Error(t, err, "NewNamespaceID(short reader) succeeded, want error")
}
