package main

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeLambda builds the Lambdas with `make lambda` and checks each zip:
// one executable entry named bootstrap, a static linux/arm64 ELF binary,
// as the provided.al2023 runtime on arm64 needs.
func TestMakeLambda(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the Lambda")
	}
	makeBin, err := exec.LookPath("make")
	require.NoError(t, err, "make is needed to test `make lambda`")
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	dir := t.TempDir()
	cmd := exec.Command(makeBin, "-C", root, "--no-print-directory", "lambda", "BIN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make lambda\n%s", out)
	// Both Lambdas: the aggregator, and the provisioner of
	// Custom::ZaeLimiterLimits (infra/provisioner).
	for _, name := range []string{"aggregator.zip", "provisioner.zip"} {
		t.Run(name, func(t *testing.T) {
			zr, err := zip.OpenReader(filepath.Join(dir, name))
			require.NoError(t, err)
			defer zr.Close()
			var names []string
			for _, f := range zr.File {
				names = append(names, f.Name)
			}
			require.Equal(t, []string{"bootstrap"}, names, "zip entries")
			entry := zr.File[0]
			assert.NotZero(t, entry.Mode().Perm()&0o111, "bootstrap mode")
			rc, err := entry.Open()
			require.NoError(t, err)
			data, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			f, err := elf.NewFile(bytes.NewReader(data))
			require.NoError(t, err, "bootstrap is not ELF")
			defer f.Close()
			assert.Equal(t, elf.ELFCLASS64, f.Class, "bootstrap is %v %v %v, want ELFCLASS64 EM_AARCH64 ET_EXEC", f.Class, f.Machine, f.Type)
			assert.Equal(t, elf.EM_AARCH64, f.Machine, "bootstrap is %v %v %v, want ELFCLASS64 EM_AARCH64 ET_EXEC", f.Class, f.Machine, f.Type)
			assert.Equal(t, elf.ET_EXEC, f.Type, "bootstrap is %v %v %v, want ELFCLASS64 EM_AARCH64 ET_EXEC", f.Class, f.Machine, f.Type)
			for _, p := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "bootstrap is dynamically linked (PT_INTERP)")
			}
			// A Go binary built for Linux carries the Go build id note and, unlike
			// other GOOSes, no OS-specific ABI: check the GOOS through the build
			// info the Go linker embeds.
			sec := f.Section(".go.buildinfo")
			require.NotNil(t, sec, "no .go.buildinfo section: not a Go binary")
			info, err := sec.Data()
			require.NoError(t, err)
			for _, want := range []string{"GOOS=linux", "GOARCH=arm64", "lambda.norpc"} {
				assert.Contains(t, string(info), want, "build info")
			}
		})
	}
}
