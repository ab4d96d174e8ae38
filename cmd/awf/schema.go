package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/awf-project/awf/proto"
)

const schemaUsage = `usage: awf schema check [--json] SCHEMA
       awf schema validate --schema SCHEMA [FILE|-]

SCHEMA is the schema JSON text itself, "-" to read it from standard input,
or "@PATH" to read it from a file.

check     exits 0 if the schema is valid and 1 if not; prints the exact
          cardinality, the charge in bits and what the charge means for each
          sensitivity budget (--json: one JSON object).
validate  treats FILE (default: standard input) as a /query/out file; exits 0
          and prints the canonical value if it conforms, else exits 1 with
          the reason.
`

// schemaArgs is the parsed command line of a schema subcommand.
type schemaArgs struct {
	json       bool
	schema     string
	haveSchema bool
	positional []string
}

// parseSchemaArgs accepts --json (if allowJSON), --schema V / --schema=V (if
// allowSchema), "--" and positionals, in any order.
func parseSchemaArgs(args []string, allowJSON, allowSchema bool) (schemaArgs, error) {
	var a schemaArgs
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			a.positional = append(a.positional, args[i+1:]...)
			return a, nil
		case arg == "--json" && allowJSON:
			a.json = true
		case (arg == "--schema" || strings.HasPrefix(arg, "--schema=")) && allowSchema:
			if a.haveSchema {
				return a, errors.New("--schema given twice")
			}
			if v, ok := strings.CutPrefix(arg, "--schema="); ok {
				a.schema = v
			} else {
				if i+1 >= len(args) {
					return a, errors.New("--schema needs a value")
				}
				i++
				a.schema = args[i]
			}
			a.haveSchema = true
		case arg != "-" && strings.HasPrefix(arg, "-"):
			return a, fmt.Errorf("unknown flag %q", arg)
		default:
			a.positional = append(a.positional, arg)
		}
	}
	return a, nil
}

// tooLargeError is input over the protocol's size limit: invalid input, not
// a usage error.
type tooLargeError struct {
	what  string
	limit int
}

func (e tooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than the maximum of %d bytes", e.what, e.limit)
}

func isTooLarge(err error) bool {
	var t tooLargeError
	return errors.As(err, &t)
}

// readLimited reads at most limit bytes and fails if there are more.
func readLimited(r io.Reader, limit int, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, tooLargeError{what, limit}
	}
	return b, nil
}

// schemaText resolves a SCHEMA argument: literal text, "-" or "@PATH".
func schemaText(arg string, stdin io.Reader) ([]byte, error) {
	switch {
	case arg == "-":
		b, err := readLimited(stdin, proto.MaxJSONBytes, "schema text")
		if err != nil && !isTooLarge(err) {
			err = fmt.Errorf("read schema from standard input: %w", err)
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		f, err := os.Open(arg[1:])
		if err != nil {
			return nil, fmt.Errorf("read schema: %w", err)
		}
		defer f.Close()
		b, err := readLimited(f, proto.MaxJSONBytes, "schema text")
		if err != nil && !isTooLarge(err) {
			err = fmt.Errorf("read schema %s: %w", arg[1:], err)
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return []byte(arg), nil
}

// budgetReport is what one query of a schema means for a sensitivity.
type budgetReport struct {
	Sensitivity   string `json:"sensitivity"`
	Metered       bool   `json:"metered"`
	BudgetBits    *int64 `json:"budget_bits"`
	Affordable    bool   `json:"affordable"`
	QueriesPerRun *int64 `json:"queries_per_run"`
}

// checkReport is the --json output for a valid schema.
type checkReport struct {
	Valid           bool           `json:"valid"`
	Cardinality     *string        `json:"cardinality"`
	CardinalityLog2 float64        `json:"cardinality_log2"`
	ChargeBits      int64          `json:"charge_bits"`
	ChargeCapped    bool           `json:"charge_capped"`
	SchemaBytes     int            `json:"schema_bytes"`
	Budgets         []budgetReport `json:"budgets"`
}

// invalidReport is the --json output for an invalid schema.
type invalidReport struct {
	Valid bool   `json:"valid"`
	Error string `json:"error"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func budgets(charge int64) []budgetReport {
	var out []budgetReport
	for _, name := range proto.Sensitivities() {
		bits, metered, _ := proto.SensitivityBudget(name)
		ok, n := proto.Affordable(name, charge)
		r := budgetReport{Sensitivity: name, Metered: metered, Affordable: ok}
		if metered {
			r.BudgetBits, r.QueriesPerRun = &bits, &n
		}
		out = append(out, r)
	}
	return out
}

// schemaCheck implements "awf schema check".
func schemaCheck(_ context.Context, e env) int {
	a, err := parseSchemaArgs(e.args, true, false)
	if err == nil && len(a.positional) != 1 {
		err = errors.New("exactly one SCHEMA argument is required")
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "awf schema check: %v\n%s", err, schemaUsage)
		return 2
	}
	text, err := schemaText(a.positional[0], e.stdin)
	if err != nil && !isTooLarge(err) {
		fmt.Fprintf(e.stderr, "awf schema check: %v\n", err)
		return 2
	}
	var s *proto.Schema
	if err == nil {
		s, err = proto.ParseSchema(text)
	}
	if err != nil {
		if a.json {
			if werr := writeJSON(e.stdout, invalidReport{Valid: false, Error: err.Error()}); werr != nil {
				fmt.Fprintf(e.stderr, "awf schema check: %v\n", werr)
			}
		} else {
			fmt.Fprintf(e.stderr, "awf schema check: %v\n", err)
		}
		return 1
	}
	r := checkReport{
		Valid:           true,
		CardinalityLog2: s.CardinalityLog2(),
		ChargeBits:      s.ChargeBits(),
		ChargeCapped:    s.ChargeCapped(),
		SchemaBytes:     len(s.Compact()),
		Budgets:         budgets(s.ChargeBits()),
	}
	if c := s.Cardinality(); c != nil {
		d := c.String()
		r.Cardinality = &d
	}
	if a.json {
		if err := writeJSON(e.stdout, r); err != nil {
			fmt.Fprintf(e.stderr, "awf schema check: %v\n", err)
			return 1
		}
		return 0
	}
	printCheck(e.stdout, r)
	return 0
}

func printCheck(w io.Writer, r checkReport) {
	fmt.Fprintln(w, "schema valid")
	if r.Cardinality != nil {
		fmt.Fprintf(w, "cardinality: %s\n", *r.Cardinality)
	} else {
		fmt.Fprintf(w, "cardinality: about 2^%.0f (too large to print exactly)\n", r.CardinalityLog2)
	}
	schemaBits := r.ChargeBits - proto.ResultStatusBits - proto.TimingBucketBits
	capped := ""
	if r.ChargeCapped {
		capped = ", capped"
	}
	fmt.Fprintf(w, "charge: %d bits (%d status + %d schema%s + %d timing)\n",
		r.ChargeBits, proto.ResultStatusBits, schemaBits, capped, proto.TimingBucketBits)
	fmt.Fprintf(w, "schema size: %d of %d bytes (compact)\n", r.SchemaBytes, proto.MaxSchemaBytes)
	fmt.Fprintln(w, "per-run budgets of a fresh repository:")
	for _, b := range r.Budgets {
		switch {
		case !b.Metered:
			fmt.Fprintf(w, "  %-13s unmetered: affordable, not debited\n", b.Sensitivity)
		case b.Affordable:
			fmt.Fprintf(w, "  %-13s %d bits: affordable, %d queries of this schema per run\n", b.Sensitivity, *b.BudgetBits, *b.QueriesPerRun)
		default:
			fmt.Fprintf(w, "  %-13s %d bits: not affordable (charge %d > %d)\n", b.Sensitivity, *b.BudgetBits, r.ChargeBits, *b.BudgetBits)
		}
	}
}

// schemaValidate implements "awf schema validate".
func schemaValidate(_ context.Context, e env) int {
	a, err := parseSchemaArgs(e.args, false, true)
	switch {
	case err != nil:
	case !a.haveSchema:
		err = errors.New("--schema is required")
	case len(a.positional) > 1:
		err = errors.New("at most one FILE argument is allowed")
	}
	input := "-"
	if err == nil && len(a.positional) == 1 {
		input = a.positional[0]
	}
	if err == nil && input == "-" && a.schema == "-" {
		err = errors.New("standard input cannot hold both the schema and the result")
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "awf schema validate: %v\n%s", err, schemaUsage)
		return 2
	}
	text, err := schemaText(a.schema, e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf schema validate: %v\n", err)
		if isTooLarge(err) {
			return 1
		}
		return 2
	}
	s, err := proto.ParseSchema(text)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf schema validate: %v\n", err)
		return 1
	}
	out, err := readResult(input, e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf schema validate: %v\n", err)
		return 1
	}
	canonical, err := s.CheckResult(out)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf schema validate: %v\n", err)
		return 1
	}
	if _, err := fmt.Fprintf(e.stdout, "%s\n", canonical); err != nil {
		return 1
	}
	return 0
}

// readResult reads a /query/out stand-in of at most MaxResultBytes.
func readResult(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		b, err := readLimited(stdin, proto.MaxResultBytes, "result")
		if err != nil {
			return nil, fmt.Errorf("read result from standard input: %w", err)
		}
		return b, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	defer f.Close()
	b, err := readLimited(f, proto.MaxResultBytes, "result")
	if err != nil {
		return nil, fmt.Errorf("read result %s: %w", name, err)
	}
	return b, nil
}
