package main

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMakeLambda builds the Lambdas with `make lambda` and checks each zip:
// one executable entry named bootstrap, a static linux/arm64 ELF binary,
// as the provided.al2023 runtime on arm64 needs.
func TestMakeLambda(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the Lambda")
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is needed to test `make lambda`: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(makeBin, "-C", root, "--no-print-directory", "lambda", "BIN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make lambda: %v\n%s", err, out)
	}
	// Both Lambdas: the aggregator, and the provisioner of
	// Custom::ZaeLimiterLimits (infra/provisioner).
	for _, name := range []string{"aggregator.zip", "provisioner.zip"} {
		t.Run(name, func(t *testing.T) {
			zr, err := zip.OpenReader(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
				var names []string
				for _, f := range zr.File {
					names = append(names, f.Name)
				}
				t.Fatalf("zip entries = %v, want [bootstrap]", names)
			}
			entry := zr.File[0]
			if mode := entry.Mode(); mode.Perm()&0o111 == 0 {
				t.Errorf("bootstrap mode = %v, want executable", mode)
			}
			rc, err := entry.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("bootstrap is not ELF: %v", err)
			}
			defer f.Close()
			if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
				t.Errorf("bootstrap is %v %v %v, want ELFCLASS64 EM_AARCH64 ET_EXEC", f.Class, f.Machine, f.Type)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Error("bootstrap is dynamically linked (PT_INTERP)")
				}
			}
			// A Go binary built for Linux carries the Go build id note and, unlike
			// other GOOSes, no OS-specific ABI: check the GOOS through the build
			// info the Go linker embeds.
			if sec := f.Section(".go.buildinfo"); sec == nil {
				t.Error("no .go.buildinfo section: not a Go binary")
			} else if b, err := sec.Data(); err != nil || !bytes.Contains(b, []byte("GOOS=linux")) || !bytes.Contains(b, []byte("GOARCH=arm64")) || !bytes.Contains(b, []byte("lambda.norpc")) {
				t.Errorf("build info lacks GOOS=linux, GOARCH=arm64 or the lambda.norpc tag (err %v)", err)
			}
		})
	}
}
