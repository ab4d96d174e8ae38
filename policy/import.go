package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Formats import recognises.
const (
	FormatPolicy = "policy"
	FormatDocker = "docker"
	FormatOCI    = "oci"
)

// ReasonNeeded starts the reason of every imported rule. Lint reports it as
// an error, so an imported draft cannot be used before a reviewer has
// written why each rule is there.
const ReasonNeeded = "reason needed"

// ImportAssumption is what import resolves a profile's includes and
// excludes for, stated in every draft: the sandbox holds no capabilities,
// runs on awf's architectures, and its kernel is newer than any minKernel a
// profile names (awf needs 5.x features; the host runs a current kernel).
const ImportAssumption = "no capabilities; architectures x86_64 and aarch64; the kernel is at least every minKernel named"

// Imported is a Docker or OCI seccomp profile read for review: a .policy
// draft and, per architecture, a policy whose compiled table is the
// profile's decisions under ImportAssumption.
type Imported struct {
	Name   string
	Format string // FormatDocker or FormatOCI
	// Arches are the architectures the profile covers, in awf's names.
	Arches []string
	// perArch holds the exact rules that apply on each arch. They bypass
	// the .policy checks: a foreign profile may allow what awf never does,
	// and the diff must show it.
	perArch map[string]*Policy
	draft   strings.Builder
}

// Draft is the reviewed-policy draft: every rule with a ReasonNeeded
// placeholder, a comment for each element dropped or assumed.
func (im *Imported) Draft() string { return im.draft.String() }

// Table is the profile's decision table on arch.
func (im *Imported) Table(arch string) (Table, error) {
	canon, err := CanonicalArch(arch)
	if err != nil {
		return Table{}, err
	}
	p, ok := im.perArch[canon]
	if !ok {
		return Table{}, fmt.Errorf("%s: the profile does not cover %s", im.Name, canon)
	}
	return p.Table(canon)
}

// DetectFormat names the format of a policy source by its content: JSON is
// an OCI document (a config.json, or a bare linux.seccomp section without
// Docker's own fields) or a Docker profile; anything else is .policy text.
func DetectFormat(data []byte) string {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return FormatPolicy
	}
	var probe struct {
		OCIVersion *json.RawMessage             `json:"ociVersion"`
		Linux      *json.RawMessage             `json:"linux"`
		ArchMap    *json.RawMessage             `json:"archMap"`
		Syscalls   []map[string]json.RawMessage `json:"syscalls"`
	}
	if json.Unmarshal(trimmed, &probe) != nil {
		return FormatDocker // let the strict decoder say what is wrong
	}
	if probe.OCIVersion != nil || probe.Linux != nil {
		return FormatOCI
	}
	if probe.ArchMap != nil {
		return FormatDocker
	}
	for _, sc := range probe.Syscalls {
		for _, k := range []string{"comment", "includes", "excludes", "name"} {
			if _, ok := sc[k]; ok {
				return FormatDocker
			}
		}
	}
	return FormatOCI
}

// Import reads a Docker profile or OCI seccomp JSON (DetectFormat decides).
func Import(name string, data []byte) (*Imported, error) {
	switch DetectFormat(data) {
	case FormatDocker:
		return ImportDocker(name, data)
	case FormatOCI:
		return ImportOCI(name, data)
	}
	return nil, fmt.Errorf("%s: not a JSON seccomp profile", name)
}

// ImportDocker reads a Docker/moby seccomp profile strictly.
func ImportDocker(name string, data []byte) (*Imported, error) {
	var prof dockerProfile
	if err := decodeStrict(data, &prof); err != nil {
		return nil, fmt.Errorf("%s: docker seccomp profile: %w", name, err)
	}
	if prof.Syscalls == nil {
		return nil, fmt.Errorf("%s: docker seccomp profile: missing syscalls", name)
	}
	return convert(name, FormatDocker, prof)
}

// ImportOCI reads an OCI runtime-spec seccomp section, bare or inside a
// config.json (only linux.seccomp is read, strictly).
func ImportOCI(name string, data []byte) (*Imported, error) {
	var outer struct {
		OCIVersion *json.RawMessage `json:"ociVersion"`
		Linux      *struct {
			Seccomp json.RawMessage `json:"seccomp"`
		} `json:"linux"`
	}
	section := data
	if err := json.Unmarshal(data, &outer); err == nil && (outer.OCIVersion != nil || outer.Linux != nil) {
		if err := checkDuplicateKeys(data); err != nil {
			return nil, fmt.Errorf("%s: oci config: %w", name, err)
		}
		if outer.Linux == nil || len(outer.Linux.Seccomp) == 0 || string(outer.Linux.Seccomp) == "null" {
			return nil, fmt.Errorf("%s: oci config has no linux.seccomp section", name)
		}
		section = outer.Linux.Seccomp
	}
	var sec specs.LinuxSeccomp
	if err := decodeStrict(section, &sec); err != nil {
		return nil, fmt.Errorf("%s: oci seccomp section: %w", name, err)
	}
	prof := dockerProfile{
		DefaultAction: sec.DefaultAction, DefaultErrnoRet: sec.DefaultErrnoRet,
		ListenerPath: sec.ListenerPath, ListenerMetadata: sec.ListenerMetadata,
		Architectures: sec.Architectures, Flags: sec.Flags, Syscalls: []dockerSyscall{},
	}
	for _, sc := range sec.Syscalls {
		ds := dockerSyscall{Names: sc.Names, Action: sc.Action, ErrnoRet: sc.ErrnoRet}
		for _, a := range sc.Args {
			ds.Args = append(ds.Args, dockerArg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: a.Op})
		}
		prof.Syscalls = append(prof.Syscalls, ds)
	}
	return convert(name, FormatOCI, prof)
}

// importAction maps a profile action to a policy action, with a note when
// the mapping is not exact.
func importAction(act specs.LinuxSeccompAction, errnoRet *uint) (Action, string, error) {
	errno := func() (Action, error) {
		e := uint(unix.EPERM) // runc's default errno
		if errnoRet != nil {
			e = *errnoRet
		}
		if e == 0 || e > 4095 {
			return Action{}, fmt.Errorf("errnoRet %d is not an errno", e)
		}
		return Action{Kind: ActErrno, Errno: syscall.Errno(e)}, nil
	}
	if errnoRet != nil && act != specs.ActErrno && act != specs.ActTrace {
		return Action{}, "", fmt.Errorf("errnoRet with action %s", act)
	}
	switch act {
	case specs.ActAllow:
		return Action{Kind: ActAllow}, "", nil
	case specs.ActErrno:
		a, err := errno()
		return a, "", err
	case specs.ActKillProcess:
		return Action{Kind: ActKill}, "", nil
	case specs.ActKill, specs.ActKillThread:
		return Action{Kind: ActKill}, "assumed: " + string(act) + " kills one thread; the draft kills the process", nil
	case specs.ActTrap:
		return Action{Kind: ActKill}, "assumed: SCMP_ACT_TRAP sends a catchable SIGSYS; the draft kills the process", nil
	case specs.ActLog:
		return Action{Kind: ActAllow}, "assumed: SCMP_ACT_LOG logs and allows; the draft allows", nil
	case specs.ActTrace:
		return Action{Kind: ActErrno, Errno: unix.ENOSYS}, "assumed: SCMP_ACT_TRACE without a tracer fails the call with ENOSYS", nil
	}
	return Action{}, "", fmt.Errorf("action %q cannot be imported (awf has no user-space notifier or tracer)", act)
}

var importOps = map[specs.LinuxSeccompOperator]Op{
	specs.OpEqualTo: OpEq, specs.OpNotEqual: OpNe, specs.OpLessThan: OpLt,
	specs.OpLessEqual: OpLe, specs.OpGreaterThan: OpGt, specs.OpGreaterEqual: OpGe,
}

// importConds translates an entry's args. Like runc, args that compare one
// index more than once are not ANDed: each becomes its own rule.
func importConds(args []dockerArg) ([][]Cond, []string, error) {
	var conds []Cond
	var notes []string
	count := map[uint]int{}
	for _, a := range args {
		if a.Index > 5 {
			return nil, nil, fmt.Errorf("argument index %d (seccomp has arg0..arg5)", a.Index)
		}
		count[a.Index]++
		c := Cond{Arg: a.Index}
		switch a.Op {
		case specs.OpMaskedEqual:
			c.HasMask, c.Mask, c.Op, c.Values = true, a.Value, OpEq, []uint64{a.ValueTwo}
			if a.ValueTwo&^a.Value != 0 {
				notes = append(notes, fmt.Sprintf("note: value %#x has bits outside the mask %#x and never matches; the .policy parser refuses it", a.ValueTwo, a.Value))
			}
		default:
			op, ok := importOps[a.Op]
			if !ok {
				return nil, nil, fmt.Errorf("unknown comparison %q", a.Op)
			}
			c.Op, c.Values = op, []uint64{a.Value}
			if a.ValueTwo != 0 {
				notes = append(notes, fmt.Sprintf("dropped: valueTwo %#x of arg%d (only %s uses it)", a.ValueTwo, a.Index, specs.OpMaskedEqual))
			}
		}
		c.Names = []string{""}
		conds = append(conds, c)
	}
	for _, n := range count {
		if n > 1 {
			notes = append(notes, "assumed: an index is compared more than once, so, as runc does, each comparison is a rule of its own (ORed)")
			out := make([][]Cond, len(conds))
			for i, c := range conds {
				out[i] = []Cond{c}
			}
			return out, notes, nil
		}
	}
	return [][]Cond{conds}, notes, nil
}

// goArchOf maps a profile's includes/excludes arch (Go names) to awf's.
func goArchOf(name string) (string, bool) {
	for _, a := range arches {
		if a.goarch == name {
			return a.name, true
		}
	}
	return "", false
}

// profileArches resolves architectures / archMap to awf's architectures,
// noting what is dropped.
func profileArches(prof dockerProfile) ([]string, []string, error) {
	if len(prof.Architectures) > 0 && len(prof.ArchMap) > 0 {
		return nil, nil, errors.New("both architectures and archMap (Docker refuses that)")
	}
	var out, notes []string
	add := func(arch specs.Arch) bool {
		for _, a := range arches {
			if a.oci == arch {
				for _, have := range out {
					if have == a.name {
						return true
					}
				}
				out = append(out, a.name)
				return true
			}
		}
		return false
	}
	var other []string
	for _, a := range prof.Architectures {
		if !add(a) {
			other = append(other, string(a))
		}
	}
	for _, m := range prof.ArchMap {
		if !add(m.Architecture) {
			other = append(other, string(m.Architecture))
			continue
		}
		if len(m.SubArchitectures) > 0 {
			subs := make([]string, len(m.SubArchitectures))
			for i, s := range m.SubArchitectures {
				subs[i] = string(s)
			}
			notes = append(notes, fmt.Sprintf("dropped: sub-architectures %s of %s: awf's filter kills compat ABIs as a bad architecture, so the tables show them killed", strings.Join(subs, ", "), m.Architecture))
		}
	}
	if len(other) > 0 {
		notes = append(notes, "dropped: architectures "+strings.Join(other, ", ")+": awf compiles for x86_64 and aarch64 only")
	}
	if len(prof.Architectures) == 0 && len(prof.ArchMap) == 0 {
		out = []string{"x86_64", "aarch64"}
		notes = append(notes, "assumed: no architectures listed (the runtime's native one applies): x86_64 and aarch64")
	}
	if len(out) == 0 {
		return nil, notes, errors.New("the profile covers neither x86_64 nor aarch64")
	}
	rank := map[string]int{}
	for i, a := range arches {
		rank[a.name] = i
	}
	sort.Slice(out, func(i, j int) bool { return rank[out[i]] < rank[out[j]] })
	return out, notes, nil
}

// applies decides whether an entry applies on arch under ImportAssumption,
// with a note for each filter it resolved.
func applies(sc dockerSyscall, arch string) (bool, []string) {
	var notes []string
	onArch := func(list []string) bool {
		for _, a := range list {
			if n, ok := goArchOf(a); ok && n == arch {
				return true
			}
		}
		return false
	}
	ok := true
	if in := sc.Includes; in != nil {
		if len(in.Caps) > 0 {
			ok = false
			notes = append(notes, "dropped: needs capabilities "+strings.Join(in.Caps, ", ")+" (assumed none)")
		}
		if len(in.Arches) > 0 && !onArch(in.Arches) {
			ok = false
		}
		if in.MinKernel != "" {
			notes = append(notes, "assumed: the kernel is at least "+in.MinKernel+", so the rule applies")
		}
	}
	if ex := sc.Excludes; ex != nil {
		if len(ex.Caps) > 0 {
			notes = append(notes, "assumed: excluded for capabilities "+strings.Join(ex.Caps, ", ")+", which the sandbox does not hold, so the rule applies")
		}
		if len(ex.Arches) > 0 && onArch(ex.Arches) {
			ok = false
		}
		if ex.MinKernel != "" {
			ok = false
			notes = append(notes, "dropped: excluded from kernel "+ex.MinKernel+" on (assumed newer)")
		}
	}
	return ok, notes
}

// convert builds the per-arch policies and the draft from a decoded profile.
func convert(name, format string, prof dockerProfile) (*Imported, error) {
	im := &Imported{Name: name, Format: format, perArch: map[string]*Policy{}}
	fail := func(format string, args ...any) (*Imported, error) {
		return nil, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
	def, defNote, err := importAction(prof.DefaultAction, prof.DefaultErrnoRet)
	if err != nil {
		return fail("defaultAction: %v", err)
	}
	archs, archNotes, err := profileArches(prof)
	if err != nil {
		return fail("%v", err)
	}
	im.Arches = archs
	for _, a := range archs {
		im.perArch[a] = &Policy{Name: name, Version: 1, DefaultAction: def, Arches: []string{a}, imported: true,
			DefaultReason: "the profile's defaultAction " + string(prof.DefaultAction)}
	}

	d := &im.draft
	fmt.Fprintf(d, "# Draft .policy imported by \"awf policy import\" from %s (%s seccomp JSON).\n", name, format)
	fmt.Fprintf(d, "# Every reason is the placeholder %q, which lint reports as an error:\n", ReasonNeeded)
	d.WriteString("# a reviewer must write why each rule is there before the policy is used.\n")
	fmt.Fprintf(d, "# includes/excludes resolved for: %s.\n", ImportAssumption)
	d.WriteString("# Each dropped or assumed element has a comment where it was.\n\nversion 1\n\n")
	comment := func(notes ...string) {
		for _, n := range notes {
			if n != "" {
				fmt.Fprintf(d, "# %s\n", n)
			}
		}
	}
	comment(defNote)
	if prof.DefaultErrnoRet != nil {
		comment(fmt.Sprintf("defaultErrnoRet %d", *prof.DefaultErrnoRet))
	}
	fmt.Fprintf(d, "default %s : %s (defaultAction %s)\n\n", def, ReasonNeeded, prof.DefaultAction)
	comment(archNotes...)
	if prof.ListenerPath != "" || prof.ListenerMetadata != "" {
		comment("dropped: listenerPath/listenerMetadata: awf has no user-space notifier")
	}
	if len(prof.Flags) > 0 {
		fs := make([]string, len(prof.Flags))
		for i, f := range prof.Flags {
			fs[i] = string(f)
		}
		comment("dropped: flags " + strings.Join(fs, ", ") + ": runc sets awf's filter flags")
	}
	fmt.Fprintf(d, "arch %s\n", strings.Join(archs, " "))

	seen := map[string]string{} // draft rule key -> where first written
	for i, sc := range prof.Syscalls {
		where := fmt.Sprintf("syscalls[%d]", i)
		names := sc.Names
		if sc.Name != "" {
			names = append([]string{sc.Name}, names...)
		}
		if len(names) == 0 {
			return fail("%s: no names", where)
		}
		act, actNote, err := importAction(sc.Action, sc.ErrnoRet)
		if err != nil {
			return fail("%s: %v", where, err)
		}
		condSets, condNotes, err := importConds(sc.Args)
		if err != nil {
			return fail("%s: %v", where, err)
		}
		desc := fmt.Sprintf("imported from %s (%s", where, sc.Action)
		if sc.Comment != "" {
			desc += ", " + strings.Join(strings.Fields(strings.NewReplacer("#", "", "\n", " ").Replace(sc.Comment)), " ")
		}
		desc += ")"
		fmt.Fprintf(d, "\ngroup syscalls-%d : %s\n", i, desc)
		if sc.Name != "" {
			comment("assumed: the old single-name field \"name\" is one more name")
		}
		comment(actNote)
		comment(condNotes...)
		on := map[string]bool{}
		var filterNotes []string
		for _, a := range archs {
			ok, notes := applies(sc, a)
			on[a] = ok
			if len(filterNotes) == 0 {
				filterNotes = notes
			}
		}
		comment(filterNotes...)
		for _, n := range names {
			exists := map[string]bool{}
			var where2 []string
			for _, a := range archs {
				info, _ := lookupArch(a)
				if _, ok := syscallNumber(n, info); ok {
					exists[a] = true
					if on[a] {
						where2 = append(where2, a)
					}
				}
			}
			if !syscallNameRE().MatchString(n) {
				return fail("%s: %q is not a system call name", where, n)
			}
			if len(exists) == 0 {
				comment("dropped: " + n + ": libseccomp " + LibseccompVersion() + " knows no such system call on " + strings.Join(archs, " or "))
				continue
			}
			if len(where2) == 0 {
				if !filterDropped(filterNotes) {
					comment("dropped: " + n + ": the entry's includes/excludes leave it on no architecture awf compiles for")
				} else {
					comment("dropped: " + n)
				}
				continue
			}
			if len(where2) < len(exists) {
				comment("assumed: " + n + " applies on " + strings.Join(where2, ", ") + " only in the profile; a policy rule applies on every arch, so the tables keep the profile's per-arch decision and this draft does not")
			}
			for _, conds := range condSets {
				r := Rule{Group: fmt.Sprintf("syscalls-%d", i), Action: act, Syscall: n, Conds: conds,
					Reason: fmt.Sprintf("%s (%s)", ReasonNeeded, where)}
				for _, a := range where2 {
					im.perArch[a].Rules = append(im.perArch[a].Rules, r)
				}
				key := n + " " + r.Condition()
				if prev, dup := seen[key]; dup {
					comment(fmt.Sprintf("duplicate: %s %s already appears in %s", act, describe(r), prev))
					continue
				}
				seen[key] = where
				head := act.String() + " " + n
				if c := r.Condition(); c != "" {
					head += " if " + c
				}
				fmt.Fprintf(d, "%s : %s\n", head, ReasonNeeded)
			}
		}
	}
	return im, nil
}

// filterDropped reports whether the notes already say why an entry is dropped.
func filterDropped(notes []string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, "dropped:") {
			return true
		}
	}
	return false
}
