package scheduler

import (
	"encoding/json"
	"reflect"

	"github.com/larkrun/lark/internal/schedule"
)

// 002 writes a schedule with its own member names. The spec README maps only 002's older id
// family and definition_id onto 000, so Lark takes 002's names as aliases of its own (docs/schedules.md,
// "002's member names"): cron is expression {"kind": "cron", "value": cron}, params is
// input_overrides, enabled is status (true: active, false: paused, as 002's :pause answers) and
// missed_schedule_policy is missed_policy. An alias and the member it stands for may both be sent
// only when they agree.

// aliases folds 002's members into Lark's.
func (spec *Spec) aliases() error {
	if spec.Cron != "" {
		e := schedule.Expression{Kind: "cron", Value: spec.Cron}
		if spec.Expression != nil && *spec.Expression != e {
			return invalid("$.cron", "INVALID_VALUE", "cron (002's name of expression {\"kind\": \"cron\", ...}) disagrees with expression; send one of them")
		}
		spec.Expression, spec.Cron = &e, ""
	}
	if len(spec.Params) > 0 {
		if len(spec.InputOverrides) > 0 && !sameJSON(spec.InputOverrides, spec.Params) {
			return invalid("$.params", "INVALID_VALUE", "params (002's name of input_overrides) disagrees with input_overrides; send one of them")
		}
		spec.InputOverrides, spec.Params = spec.Params, nil
	}
	if spec.Enabled != nil {
		st := string(schedule.StatusPaused)
		if *spec.Enabled {
			st = string(schedule.StatusActive)
		}
		if spec.Status != "" && spec.Status != st {
			return invalid("$.enabled", "INVALID_VALUE", "enabled (002's name of status) is %t but status is %q; send one of them", *spec.Enabled, spec.Status)
		}
		spec.Status, spec.Enabled = st, nil
	}
	if spec.MissedSchedulePolicy != "" {
		if spec.MissedPolicy != "" && spec.MissedPolicy != spec.MissedSchedulePolicy {
			return invalid("$.missed_schedule_policy", "INVALID_VALUE", "missed_schedule_policy (002's name of missed_policy) disagrees with missed_policy; send one of them")
		}
		spec.MissedPolicy, spec.MissedSchedulePolicy = spec.MissedSchedulePolicy, ""
	}
	return nil
}

// sameJSON reports whether two JSON documents are equal as values.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y) // decoded values: maps, slices, strings, float64s, bools, nil
}

// patchAliases renames 002's members of a merge patch to Lark's before it is merged into the
// current schedule, so that they replace what they stand for (params merges into input_overrides
// as input_overrides would). A patch that sends both keeps both, for aliases to compare.
func patchAliases(patch map[string]any) map[string]any {
	out := make(map[string]any, len(patch))
	for k, v := range patch {
		out[k] = v
	}
	rename := func(alias, member string, conv func(any) any) {
		v, ok := out[alias]
		if _, both := out[member]; !ok || both || v == nil {
			return
		}
		out[member] = conv(v)
		delete(out, alias)
	}
	same := func(v any) any { return v }
	rename("cron", "expression", func(v any) any { return map[string]any{"kind": "cron", "value": v} })
	rename("params", "input_overrides", same)
	rename("missed_schedule_policy", "missed_policy", same)
	rename("enabled", "status", func(v any) any {
		if b, ok := v.(bool); ok {
			if b {
				return string(schedule.StatusActive)
			}
			return string(schedule.StatusPaused)
		}
		return v
	})
	return out
}
