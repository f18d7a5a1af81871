package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra"
)

// defaultLambdaZip is where `make lambda` writes the aggregator's code.
const defaultLambdaZip = "bin/aggregator.zip"

// defaultProvisionerZip is where `make lambda` writes the provisioner's code.
const defaultProvisionerZip = "bin/provisioner.zip"

// logRetentionDays are CloudWatch's retention periods, the
// --log-retention-days choices.
var logRetentionDays = infra.LogRetentionPeriods

// optionFlags names the deploy flag of each infra.StackOptions field, so that
// an invalid option is reported by its flag.
var optionFlags = map[string]string{
	"SnapshotWindows": "--snapshot-windows", "UsageRetentionDays": "--usage-retention-days",
	"AuditRetentionDays": "--audit-retention-days", "PITRRecoveryDays": "--pitr-recovery-days",
	"LogRetentionDays": "--log-retention-days", "LambdaTimeout": "--lambda-timeout",
	"LambdaMemory": "--lambda-memory", "AlarmSNSTopic": "--alarm-sns-topic",
	"LambdaDurationThresholdPct": "--lambda-duration-threshold-pct", "PermissionBoundary": "--permission-boundary",
	"RoleNameFormat": "--role-name-format", "PolicyNameFormat": "--policy-name-format",
	"AuditArchiveGlacierDays": "--audit-archive-glacier-days", "CreateIAMRoles": "--create-iam-roles",
	"AggregatorRoleARN": "--aggregator-role-arn", "Tags": "--tag", "EnableProvisioner": "--enable-provisioner",
}

// flagError rewrites an infra.StackOptions validation error to name the
// flag instead of the field.
func flagError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "infra: ")
	for field, flag := range optionFlags {
		for _, sep := range []string{" ", ":"} {
			if i := strings.Index(msg, field+sep); i >= 0 && (i == 0 || msg[i-1] == ' ') {
				return errors.New(msg[:i] + flag + msg[i+len(field):])
			}
		}
	}
	return errors.New(msg)
}

func clientVersion() string { return infra.Version }

// infraErr explains errors.ErrUnsupported from a package infra that is not
// implemented yet.
func infraErr(err error) error {
	if errors.Is(err, errors.ErrUnsupported) {
		return errors.New("stack commands are not available in this build (package infra is not implemented)")
	}
	return err
}

// stackOptionFlags maps the deploy flags onto infra.StackOptions.
func stackOptionFlags(f *command, o *infra.StackOptions, tags *[]string) {
	// The defaults are the ones documented on infra.StackOptions.
	f.str(&o.SnapshotWindows, "snapshot-windows", "", "hourly,daily", "comma-separated usage snapshot windows")
	f.integer(&o.UsageRetentionDays, "usage-retention-days", "", 90, "days to keep usage snapshots")
	f.integer(&o.AuditRetentionDays, "audit-retention-days", "", 90, "days to keep audit events")
	f.pair(&o.EnableAggregator, "enable-aggregator", "no-aggregator", true, "deploy the aggregator Lambda (usage snapshots, audit archival)")
	f.integer(&o.PITRRecoveryDays, "pitr-recovery-days", "", 0, "point-in-time recovery period in days, 1-35 (0: the AWS default, 35)")
	f.integer(&o.LogRetentionDays, "log-retention-days", "", 30, "days to keep Lambda logs (a CloudWatch retention period)")
	f.integer(&o.LambdaTimeout, "lambda-timeout", "", 60, "Lambda timeout in seconds, 1-900")
	f.integer(&o.LambdaMemory, "lambda-memory", "", 256, "Lambda memory in MB, 128-3008")
	f.pair(&o.EnableAlarms, "enable-alarms", "no-alarms", true, "deploy CloudWatch alarms")
	f.str(&o.AlarmSNSTopic, "alarm-sns-topic", "", "", "SNS topic ARN for alarm notifications")
	f.integer(&o.LambdaDurationThresholdPct, "lambda-duration-threshold-pct", "", 80, "Lambda duration alarm threshold, percent of the timeout (1-100)")
	f.str(&o.PermissionBoundary, "permission-boundary", "", "", "IAM permission boundary for the roles (policy name or ARN)")
	f.str(&o.RoleNameFormat, "role-name-format", "", "", "role name template; {} is replaced by the default name")
	f.str(&o.PolicyNameFormat, "policy-name-format", "", "", "managed policy name template; {} is replaced by the default name")
	f.pair(&o.EnableAuditArchival, "enable-audit-archival", "no-audit-archival", true, "archive expired audit events to S3")
	f.integer(&o.AuditArchiveGlacierDays, "audit-archive-glacier-days", "", 90, "days before audit archives move to Glacier Instant Retrieval (1-3650)")
	f.pair(&o.EnableTracing, "enable-tracing", "no-tracing", false, "enable AWS X-Ray tracing of the aggregator")
	f.pair(&o.CreateIAMRoles, "create-iam-roles", "no-create-iam-roles", false, "create the App/Admin/ReadOnly IAM roles")
	f.pair(&o.CreateIAM, "iam", "no-iam", true, "create IAM resources (policies, roles)")
	f.str(&o.AggregatorRoleARN, "aggregator-role-arn", "", "", "existing IAM role for the aggregator (enables it with --no-iam)")
	f.pair(&o.EnableDeletionProtection, "enable-deletion-protection", "no-deletion-protection", false, "enable the table's deletion protection")
	f.pair(&o.EnableProvisioner, "enable-provisioner", "no-provisioner", false, "deploy the limits provisioner Lambda serving Custom::ZaeLimiterLimits (export {stack}-ProvisionerArn)")
	f.list(tags, "tag", "t", "stack tag KEY=VALUE (repeatable)")
}

func cmdDeploy(c *cli) *command {
	f := c.newFlags("deploy", "Create or update the CloudFormation stack: the DynamoDB table, the aggregator Lambda, alarms and IAM resources. Then write the table's version record.", 0, 0, true)
	var opts infra.StackOptions
	var tags []string
	var wait bool
	var lambdaZip string
	stackOptionFlags(f, &opts, &tags)
	f.pair(&wait, "wait", "no-wait", true, "wait until the stack is complete")
	f.str(&lambdaZip, "lambda-zip", "", defaultLambdaZip, "aggregator Lambda code (built by `make lambda`)")
	var provisionerZip string
	f.str(&provisionerZip, "provisioner-zip", "", defaultProvisionerZip, "provisioner Lambda code (built by `make lambda`), with --enable-provisioner")
	f.run = func([]string) error {
		if !wait {
			return errors.New("--no-wait is not supported: deploy waits for the stack and then writes the version record")
		}
		if !slicesContains(logRetentionDays, opts.LogRetentionDays) {
			return fmt.Errorf("invalid --log-retention-days %d: use one of %s", opts.LogRetentionDays, joinInts(logRetentionDays))
		}
		if !opts.CreateIAM && opts.CreateIAMRoles {
			return errors.New("--create-iam-roles cannot be used with --no-iam")
		}
		var notes []string
		if !opts.CreateIAM && opts.EnableAggregator && opts.AggregatorRoleARN == "" {
			notes = append(notes, "Note: --no-iam disables the aggregator (no IAM role); pass --aggregator-role-arn to use an existing role.")
			opts.EnableAggregator = false
		}
		var err error
		if opts.Tags, err = parseKeyValues(tags, "--tag"); err != nil {
			return err
		}
		var code []byte
		if opts.EnableAggregator {
			code, err = os.ReadFile(lambdaZip)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("aggregator code %s not found: run `make lambda` first (or pass --lambda-zip PATH, or --no-aggregator)", lambdaZip)
			}
			if err != nil {
				return fmt.Errorf("read --lambda-zip: %w", err)
			}
		}
		var provCode []byte
		if opts.EnableProvisioner {
			provCode, err = os.ReadFile(provisionerZip)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("provisioner code %s not found: run `make lambda` first (or pass --provisioner-zip PATH)", provisionerZip)
			}
			if err != nil {
				return fmt.Errorf("read --provisioner-zip: %w", err)
			}
		}
		if err := opts.Validate(); err != nil {
			return flagError(err)
		}
		cfg, err := c.awsConfig()
		if err != nil {
			return err
		}
		progress := c.stdout
		if c.jsonOutput() {
			progress = c.stderr // keep stdout valid JSON
		}
		for _, n := range notes {
			fmt.Fprintln(progress, n)
		}
		fmt.Fprintf(progress, "Deploying stack: %s (region %s)\n", c.common.name, cfg.Region)
		d := infra.NewDeployer(cfg, func(o *infra.DeployerOptions) {
			o.ProvisionerZip = provCode
			o.Progress = func(e infra.Event) {
				line := fmt.Sprintf("  %s  %-40s %-32s %s", e.Time.UTC().Format(time.TimeOnly), e.LogicalID, e.ResourceType, e.Status)
				if e.Reason != "" {
					line += "  " + e.Reason
				}
				fmt.Fprintln(progress, line)
			}
		})
		stack, err := d.Deploy(c.ctx, c.common.name, opts, code)
		if err != nil {
			return infraErr(fmt.Errorf("deploy stack %s: %w", c.common.name, err))
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		rec := limiter.VersionRecord{SchemaVersion: limiter.SchemaVersion, ClientMinVersion: "0.0.0", UpdatedBy: "cli:" + clientVersion()}
		if err := repo.repo.SetVersionRecord(c.ctx, rec); err != nil {
			return err
		}
		if c.jsonOutput() {
			return c.writeJSON(stackToJSON(stack))
		}
		c.printf("Stack %s: %s\n", stack.Name, stack.Status)
		c.printStackOutputs(stack)
		c.printf("Version record written (schema %s)\n", limiter.SchemaVersion)
		return nil
	}
	return f
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func joinInts(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ", ")
}

// stackJSON is a deployed stack.
type stackJSON struct {
	Name         string            `json:"name"`
	ID           string            `json:"id"`
	Status       string            `json:"status"`
	StatusReason string            `json:"status_reason,omitempty"`
	Parameters   map[string]string `json:"parameters"`
	Outputs      map[string]string `json:"outputs"`
	CreatedAt    string            `json:"created_at,omitempty"`
	UpdatedAt    string            `json:"updated_at,omitempty"`
}

func stackToJSON(s infra.Stack) stackJSON {
	p, o := s.Parameters, s.Outputs
	if p == nil {
		p = map[string]string{}
	}
	if o == nil {
		o = map[string]string{}
	}
	return stackJSON{Name: s.Name, ID: s.ID, Status: s.Status, StatusReason: s.StatusReason, Parameters: p, Outputs: o,
		CreatedAt: formatTime(s.CreatedAt), UpdatedAt: formatTime(s.UpdatedAt)}
}

func (c *cli) printStackOutputs(s infra.Stack) {
	if s.ID != "" {
		c.printf("  Stack ID: %s\n", s.ID)
	}
	if len(s.Outputs) > 0 {
		c.printf("Outputs:\n")
		for _, k := range sortedKeys(s.Outputs) {
			c.printf("  %s: %s\n", k, s.Outputs[k])
		}
	}
}

func cmdStatus(c *cli) *command {
	f := c.newFlags("status", "Show the CloudFormation stack's status, parameters and outputs.", 0, 0, true)
	f.run = func([]string) error {
		cfg, err := c.awsConfig()
		if err != nil {
			return err
		}
		s, err := infra.NewDeployer(cfg).Status(c.ctx, c.common.name)
		if errors.Is(err, infra.ErrStackNotFound) {
			return fmt.Errorf("stack %q not found (deploy it with: zae-limiter deploy --name %s)", c.common.name, c.common.name)
		}
		if err != nil {
			return infraErr(err)
		}
		if c.jsonOutput() {
			return c.writeJSON(stackToJSON(s))
		}
		rows := [][]string{{"Stack:", s.Name}, {"Status:", s.Status}}
		if s.StatusReason != "" {
			rows = append(rows, []string{"Reason:", s.StatusReason})
		}
		rows = append(rows, []string{"Created:", dash(formatTime(s.CreatedAt))}, []string{"Updated:", dash(formatTime(s.UpdatedAt))})
		for _, k := range sortedKeys(s.Parameters) {
			rows = append(rows, []string{"Parameter " + k + ":", s.Parameters[k]})
		}
		for _, k := range sortedKeys(s.Outputs) {
			rows = append(rows, []string{"Output " + k + ":", s.Outputs[k]})
		}
		return c.kv(rows)
	}
	return f
}

func cmdDelete(c *cli) *command {
	f := c.newFlags("delete", "Delete the CloudFormation stack with the table and all its data. This cannot be undone.", 0, 0, true)
	var wait bool
	f.pair(&wait, "wait", "no-wait", true, "wait until the stack is gone")
	f.confirm(func([]string) string { return "delete stack " + c.common.name })
	f.run = func([]string) error {
		cfg, err := c.awsConfig()
		if err != nil {
			return err
		}
		err = infra.NewDeployer(cfg).Delete(c.ctx, c.common.name, wait)
		if errors.Is(err, infra.ErrStackNotFound) {
			return fmt.Errorf("stack %q not found", c.common.name)
		}
		if err != nil {
			return infraErr(fmt.Errorf("delete stack %s: %w", c.common.name, err))
		}
		msg := fmt.Sprintf("Stack '%s' deleted", c.common.name)
		if !wait {
			msg = fmt.Sprintf("Deletion of stack '%s' started; check it with `zae-limiter status`", c.common.name)
		}
		return c.done(msg, map[string]any{"deleted": wait, "name": c.common.name})
	}
	return f
}

func cmdCfnTemplate(c *cli) *command {
	f := c.newFlags("cfn-template", "Print the CloudFormation template (YAML) that deploy uses.", 0, 0, false)
	var path string
	f.str(&path, "output", "o", "", "write the template to this file instead of stdout")
	f.run = func([]string) error {
		t := infra.Template()
		if len(t) == 0 {
			return infraErr(errors.ErrUnsupported)
		}
		if path != "" {
			if err := os.WriteFile(path, t, 0o644); err != nil {
				return fmt.Errorf("write template: %w", err)
			}
			fmt.Fprintf(c.stderr, "Template written to %s\n", path)
			return nil
		}
		_, err := c.stdout.Write(t)
		return err
	}
	return f
}

// versionReport is the result of comparing this client with the table's
// version record.
type versionReport struct {
	ClientVersion    string `json:"client_version"`
	SchemaVersion    string `json:"schema_version"`
	Initialized      bool   `json:"initialized"`
	InfraSchema      string `json:"infra_schema_version"`
	LambdaVersion    string `json:"lambda_version"`
	ClientMinVersion string `json:"client_min_version"`
	UpdatedBy        string `json:"updated_by"`
	UpdatedAt        string `json:"updated_at"`
	Compatible       bool   `json:"compatible"`
	Message          string `json:"message"`
}

// versionCheck opens the table (which checks the schema's major version and
// writes the version record when the table has none, like any client) and
// compares the record with this client.
func (c *cli) versionCheck() (versionReport, error) {
	r := versionReport{ClientVersion: clientVersion(), SchemaVersion: limiter.SchemaVersion}
	repo, err := c.openRepo()
	var ise *limiter.IncompatibleSchemaError
	if errors.As(err, &ise) {
		r.Initialized, r.InfraSchema = true, ise.SchemaVersion
		r.Message = fmt.Sprintf("schema migration required: the table has schema %s, this client supports %s", ise.SchemaVersion, limiter.SchemaVersion)
		return r, nil
	}
	if err != nil {
		return r, err
	}
	rec, ok, err := repo.repo.VersionRecord(c.ctx)
	if err != nil {
		return r, err
	}
	r.Initialized = ok
	if !ok {
		r.Compatible = true
		r.Message = "the table has no version record"
		return r, nil
	}
	r.InfraSchema, r.LambdaVersion, r.ClientMinVersion = rec.SchemaVersion, rec.LambdaVersion, rec.ClientMinVersion
	r.UpdatedBy, r.UpdatedAt = rec.UpdatedBy, formatTime(rec.UpdatedAt)
	if min, ok := parseVersion(rec.ClientMinVersion); ok {
		if cur, _ := parseVersion(limiter.ClientVersion); compareVersions(cur, min) < 0 {
			r.Message = fmt.Sprintf("client %s is older than the table's minimum client version %s", limiter.ClientVersion, rec.ClientMinVersion)
			return r, nil
		}
	}
	r.Compatible = true
	r.Message = "client and table are compatible"
	return r, nil
}

// parseVersion parses "[v]X.Y.Z[-suffix]" into its release triple.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "-")
	s, _, _ = strings.Cut(s, "+")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// incompatible is the exit status of version/check for an incompatible
// table: the report was printed; the message goes to stderr.
func incompatible(r versionReport) error {
	return &exitCodeError{code: exitIncompatible, msg: "incompatible: " + r.Message}
}

func cmdVersion(c *cli) *command {
	f := c.newFlags("version", "Show the client version, the schema version and the table's version record; exit 1 when they are incompatible.", 0, 0, true)
	f.run = func([]string) error {
		r, err := c.versionCheck()
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			if err := c.writeJSON(r); err != nil {
				return err
			}
		} else {
			rows := [][]string{{"Client Version:", r.ClientVersion}, {"Schema Version:", r.SchemaVersion}}
			if !r.Initialized {
				rows = append(rows, []string{"Infrastructure:", "not initialized"})
			} else {
				rows = append(rows, []string{"Infra Schema:", dash(r.InfraSchema)}, []string{"Lambda Version:", dash(r.LambdaVersion)},
					[]string{"Min Client Version:", dash(r.ClientMinVersion)}, []string{"Updated By:", dash(r.UpdatedBy)},
					[]string{"Updated At:", dash(r.UpdatedAt)})
			}
			status := "COMPATIBLE"
			if !r.Compatible {
				status = "INCOMPATIBLE"
			}
			rows = append(rows, []string{"Status:", status})
			c.printf("zae-limiter Infrastructure Version (stack %s)\n\n", c.common.name)
			if err := c.kv(rows); err != nil {
				return err
			}
		}
		if !r.Compatible {
			return incompatible(r)
		}
		return nil
	}
	return f
}

func cmdCheck(c *cli) *command {
	f := c.newFlags("check", "Check that this client can use the table (read-only apart from the version record a new table gets); exit 1 when incompatible.", 0, 0, true)
	f.run = func([]string) error {
		r, err := c.versionCheck()
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			if err := c.writeJSON(r); err != nil {
				return err
			}
		} else {
			result := "COMPATIBLE"
			if !r.Compatible {
				result = "INCOMPATIBLE"
			}
			c.printf("Compatibility Check (stack %s)\n\n", c.common.name)
			if err := c.kv([][]string{
				{"Client:", r.ClientVersion}, {"Schema:", dash(r.InfraSchema)}, {"Lambda:", dash(r.LambdaVersion)},
			}); err != nil {
				return err
			}
			c.printf("\nResult: %s\n%s\n", result, r.Message)
		}
		if !r.Compatible {
			return incompatible(r)
		}
		return nil
	}
	return f
}
