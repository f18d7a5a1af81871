package ddbschema

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	if diff := cmp.Diff(v, VersionFromItem(item)); diff != "" {
		t.Errorf("version round trip (-want +got):\n%s", diff)
	}
	item[AttrTemplateVersion] = S("0.9.0")
	item[AttrLambdaVersion] = S("0.10.3")
	got := VersionFromItem(item)
	if got.TemplateVersion != "0.9.0" || got.LambdaVersion != "0.10.3" {
		t.Errorf("VersionFromItem = %+v", got)
	}
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
	if _, ok := NamespaceReverseItem(r)[AttrDeletedAt]; ok {
		t.Error("active reverse record has deleted_at")
	}
	if diff := cmp.Diff(r, NamespaceFromItem(fwd)); diff != "" {
		t.Errorf("forward round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(deleted, NamespaceFromItem(rev)); diff != "" {
		t.Errorf("reverse round trip (-want +got):\n%s", diff)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		if !alphabet.MatchString(id) || id[0] == '-' {
			t.Fatalf("NewNamespaceID() = %q, want 11 chars of [A-Za-z0-9_-] not starting with '-'", id)
		}
		seen[id] = true
	}
	if len(seen) < 200 {
		t.Errorf("NewNamespaceID produced duplicates: %d distinct of 200", len(seen))
	}

	// The first 8 bytes encode to "-AAAAAAAAAA" and must be rejected.
	src := bytes.NewReader([]byte{0xF8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	id, err := NewNamespaceID(src)
	if err != nil || id != "AAECAwQFBgc" {
		t.Errorf("NewNamespaceID(leading '-' first) = %q, %v; want AAECAwQFBgc", id, err)
	}
	// Ids may start with '_'.
	if id, err := NewNamespaceID(repeatReader{0xFC}); err != nil || id[0] != '_' {
		t.Errorf("NewNamespaceID(0xFC...) = %q, %v; want leading '_'", id, err)
	}
	if _, err := NewNamespaceID(repeatReader{0xF8}); err == nil {
		t.Error("NewNamespaceID(always '-') succeeded, want error")
	}
	if _, err := NewNamespaceID(bytes.NewReader([]byte{1, 2, 3})); err == nil {
		t.Error("NewNamespaceID(short reader) succeeded, want error")
	}
}
