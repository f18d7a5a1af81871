package main

// The operational commands: `list` (limiter stacks in a region),
// `upgrade` (bring a stack's Lambda code, tags and version record to this
// client) and `lambda-export` (the Lambdas' deployment packages, for
// Terraform or CDK users).

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra"
)

// listedStack is one stack of `list -o json`.
type listedStack struct {
	Name          string `json:"name"`
	Status        string `json:"status"`
	Version       string `json:"version"`
	LambdaVersion string `json:"lambda_version"`
	SchemaVersion string `json:"schema_version"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at,omitempty"`
}

func cmdList(c *cli) *command {
	f := c.newFlags("list", "List the limiter stacks of the region: the CloudFormation stacks tagged ManagedBy=zae-limiter, deployed by this CLI or by the original's.", 0, 0, true)
	f.run = func([]string) error {
		cfg, err := c.awsConfig()
		if err != nil {
			return err
		}
		stacks, err := infra.NewDeployer(cfg).List(c.ctx)
		if err != nil {
			return err
		}
		list := make([]listedStack, 0, len(stacks))
		for _, s := range stacks {
			name := s.Tags[infra.TagName]
			if name == "" {
				name = s.Name
			}
			list = append(list, listedStack{Name: name, Status: s.Status, Version: s.Tags[infra.TagVersion],
				LambdaVersion: s.Tags[infra.TagLambdaVersion], SchemaVersion: s.Tags[infra.TagSchemaVersion],
				CreatedAt: formatTime(s.CreatedAt), UpdatedAt: formatTime(s.UpdatedAt)})
		}
		if c.jsonOutput() {
			return c.writeJSON(map[string]any{"region": cfg.Region, "stacks": list})
		}
		if len(list) == 0 {
			c.printf("No limiter stacks in %s\n", cfg.Region)
			return nil
		}
		rows := make([][]string, 0, len(list))
		for _, s := range list {
			rows = append(rows, []string{s.Name, s.Status, dash(s.Version), dash(s.SchemaVersion), dash(s.CreatedAt)})
		}
		if err := c.table([]string{"NAME", "STATUS", "VERSION", "SCHEMA", "CREATED"}, rows); err != nil {
			return err
		}
		c.printf("\nTotal: %d stack(s) in %s\n", len(list), cfg.Region)
		return nil
	}
	return f
}

// upgradeJSON is the result of `upgrade -o json`.
type upgradeJSON struct {
	Name          string `json:"name"`
	Upgraded      bool   `json:"upgraded"`
	FromVersion   string `json:"from_version"`
	ToVersion     string `json:"to_version"`
	LambdaOnly    bool   `json:"lambda_only"`
	SchemaVersion string `json:"schema_version"`
	Message       string `json:"message"`
}

// readZip reads a Lambda zip named by a flag; missing is an error naming
// how to build it.
func readZip(path, flag, what string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s code %s not found: run `make lambda` first (or pass %s PATH)", what, path, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", flag, err)
	}
	return b, nil
}

func cmdUpgrade(c *cli) *command {
	f := c.newFlags("upgrade", "Upgrade a deployed stack to this client: compare with the table's version record, deploy the Lambda code, ensure the discovery tags, update the version record. A table whose schema needs a migration is refused (exit 2).", 0, 0, true)
	var lambdaZip, provisionerZip string
	var lambdaOnly, force bool
	f.str(&lambdaZip, "lambda-zip", "", defaultLambdaZip, "aggregator Lambda code (built by `make lambda`)")
	f.str(&provisionerZip, "provisioner-zip", "", defaultProvisionerZip, "provisioner Lambda code (built by `make lambda`), for a stack with the provisioner")
	f.boolean(&lambdaOnly, "lambda-only", "", false, "only update the functions' code (no stack update, no tags)")
	f.boolean(&force, "force", "", false, "upgrade even when the stack is at this version already")
	f.run = func([]string) error {
		cfg, err := c.awsConfig()
		if err != nil {
			return err
		}
		d := infra.NewDeployer(cfg)
		st, err := d.Status(c.ctx, c.common.name)
		if errors.Is(err, infra.ErrStackNotFound) {
			return fmt.Errorf("stack %q not found (deploy it with: zae-limiter deploy --name %s)", c.common.name, c.common.name)
		}
		if err != nil {
			return err
		}
		// The schema: opening the table refuses another major version,
		// which no upgrade can bridge without migrating the data.
		repo, err := c.openRepo()
		var ise *limiter.IncompatibleSchemaError
		if errors.As(err, &ise) {
			return fmt.Errorf("schema migration required: the table has schema %s, this client supports %s; upgrade does not migrate data", ise.SchemaVersion, limiter.SchemaVersion)
		}
		if err != nil {
			return err
		}
		rec, _, err := repo.repo.VersionRecord(c.ctx)
		if err != nil {
			return err
		}
		r := upgradeJSON{Name: c.common.name, FromVersion: st.Tags[infra.TagLambdaVersion], ToVersion: clientVersion(),
			LambdaOnly: lambdaOnly, SchemaVersion: limiter.SchemaVersion}
		if r.FromVersion == r.ToVersion && rec.UpdatedBy == "cli:"+clientVersion() && !force {
			r.Message = fmt.Sprintf("Stack %s is at %s already (pass --force to upgrade anyway)", c.common.name, r.ToVersion)
			return c.done(r.Message, r)
		}
		var o infra.UpgradeOptions
		o.LambdaOnly = lambdaOnly
		if st.Parameters[infra.ParamCodeS3Key] != "" {
			if o.AggregatorZip, err = readZip(lambdaZip, "--lambda-zip", "aggregator"); err != nil {
				return err
			}
		}
		if st.Parameters[infra.ParamProvisionerCodeS3Key] != "" {
			if o.ProvisionerZip, err = readZip(provisionerZip, "--provisioner-zip", "provisioner"); err != nil {
				return err
			}
		}
		if !c.jsonOutput() {
			c.printf("Upgrading stack %s: %s -> %s\n", c.common.name, dash(r.FromVersion), r.ToVersion)
		}
		if _, err := d.Upgrade(c.ctx, c.common.name, o); err != nil {
			return infraErr(fmt.Errorf("upgrade stack %s: %w", c.common.name, err))
		}
		// The record keeps its schema and minimum client version; the
		// Lambda's version is in the stack tag zae-limiter:lambda-version,
		// not in the record, whose lambda_version other clients of the
		// table compare with their own aggregator's (a Go version would
		// read as outdated and make them redeploy their own code).
		rec.SchemaVersion = limiter.SchemaVersion
		if rec.ClientMinVersion == "" {
			rec.ClientMinVersion = "0.0.0"
		}
		rec.LambdaVersion, rec.UpdatedBy, rec.UpdatedAt = "", "cli:"+clientVersion(), time.Time{}
		if err := repo.repo.SetVersionRecord(c.ctx, rec); err != nil {
			return err
		}
		r.Upgraded = true
		r.Message = fmt.Sprintf("Stack %s upgraded to %s; version record updated", c.common.name, r.ToVersion)
		return c.done(r.Message, r)
	}
	return f
}

// lambdaPackages are the Lambdas lambda-export builds: name → main package.
var lambdaPackages = map[string]string{
	"aggregator":  "./aggregator/cmd/aggregator",
	"provisioner": "./infra/provisioner/cmd/provisioner",
}

// lambdaInfo describes a deployment package (`lambda-export --info`).
type lambdaInfo struct {
	Function     string   `json:"function"`
	Package      string   `json:"package"`
	Runtime      string   `json:"runtime"`
	Architecture string   `json:"architecture"`
	Handler      string   `json:"handler"`
	Entry        string   `json:"entry"`
	Build        []string `json:"build"`
	Source       string   `json:"source"`
	Output       string   `json:"output"`
	Exists       bool     `json:"exists"`
	Go           string   `json:"go"`
}

func cmdLambdaExport(c *cli) *command {
	f := c.newFlags("lambda-export", "Build a Lambda's deployment package (a zip holding `bootstrap` for provided.al2023 on arm64), for Terraform or CDK; --info describes it without building.", 0, 0, false)
	var function, out, source string
	var info, force bool
	f.str(&function, "function", "", "aggregator", "the Lambda: aggregator or provisioner")
	f.str(&out, "output", "o", "", "the zip to write (default: zae-limiter-FUNCTION.zip)")
	f.str(&source, "source", "", ".", "the module's source tree (it needs the Go toolchain)")
	f.boolean(&info, "info", "", false, "describe the package without building it")
	f.boolean(&force, "force", "", false, "overwrite an existing file")
	f.run = func([]string) error {
		pkg, ok := lambdaPackages[function]
		if !ok {
			return fmt.Errorf("invalid --function %q: use aggregator or provisioner", function)
		}
		if out == "" {
			out = "zae-limiter-" + function + ".zip"
		}
		goBin, goErr := exec.LookPath("go")
		li := lambdaInfo{Function: function, Package: pkg, Runtime: "provided.al2023", Architecture: "arm64", Handler: "bootstrap", Entry: "bootstrap",
			Build:  []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", "bootstrap", pkg},
			Source: source, Output: out, Go: goBin}
		if _, err := os.Stat(out); err == nil {
			li.Exists = true
		}
		if info {
			return c.kv([][]string{
				{"Function:", li.Function}, {"Package:", li.Package + " (in " + li.Source + ")"},
				{"Runtime:", li.Runtime + ", " + li.Architecture}, {"Handler:", li.Handler},
				{"Build:", strings.Join(li.Build, " ")}, {"Output:", li.Output + existsNote(li.Exists)},
				{"Go toolchain:", dash(li.Go)},
			})
		}
		if li.Exists && !force {
			return fmt.Errorf("%s exists: pass --force to overwrite it", out)
		}
		if goErr != nil {
			return errors.New("lambda-export builds the Lambda with the Go toolchain, and `go` is not on PATH")
		}
		zipBytes, err := buildLambda(c, goBin, source, pkg)
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, zipBytes, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
		c.printf("Wrote %s (%d bytes): %s Lambda, provided.al2023 arm64, handler bootstrap\n", out, len(zipBytes), function)
		return nil
	}
	return f
}

func existsNote(exists bool) string {
	if exists {
		return " (exists; --force overwrites it)"
	}
	return ""
}

// buildLambda cross-compiles pkg in the module at source and returns a zip
// holding it as an executable `bootstrap`.
func buildLambda(c *cli, goBin, source, pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "zae-limiter-lambda-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.CommandContext(c.ctx, goBin, "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = source
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s in %s: %v: %s", pkg, source, err, strings.TrimSpace(string(out)))
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	fw, err := w.CreateHeader(h)
	if err != nil {
		return nil, err
	}
	if _, err := fw.Write(exe); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
