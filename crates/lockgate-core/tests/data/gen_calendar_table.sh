#!/usr/bin/env bash
# Regenerates calendar_table.tsv: for each case below, the next 5 elapses that
# `systemd-analyze calendar` prints, in UTC. Run once on a machine with systemd
# (the checked-in table came from systemd 252 with tzdata 2025b); the test only
# reads the TSV, so CI needs no systemd.
#
#   bash crates/lockgate-core/tests/data/gen_calendar_table.sh > crates/lockgate-core/tests/data/calendar_table.tsv
#
# Columns: local zone (TZ for systemd-analyze, local_zone for Schedule::next_after),
# base time, expression, next elapses (space-separated RFC 3339 UTC; "never" ends early).
set -euo pipefail

# zone <TAB> base (RFC 3339 UTC) <TAB> expression
cases() {
	local B=2024-03-30T12:00:00Z # a Saturday noon
	local zone expr
	# PBS documentation examples.
	for expr in 'mon..fri' 'mon,tue,wed,thu,fri' 'sat,sun' 'sat..sun' 'mon,wed,fri' '12:05' \
		'*:00/5' '*:0/15' 'mon..wed *:30/10' 'mon..fri 8..17,22:0/15' 'fri 12..13:5/20' \
		'12,14,16,18,20,22:5' '*:*' '*:0' '*-05' 'Sat *-1..7 15:00' 'sat *-1..7 03:30' \
		'2015-10-21' 'mon,wed 08..17:00/30' 'mon..fri 02:00' 'sat 03:00' '0/2:00'; do
		printf 'UTC\t%s\t%s\n' "$B" "$expr"
	done
	# Keywords.
	for expr in minutely hourly daily weekly monthly quarterly semiannually semi-annually yearly annually; do
		printf 'UTC\t%s\t%s\n' "$B" "$expr"
	done
	# systemd.time(7) examples.
	for expr in 'Sat,Thu,Mon..Wed,Sat..Sun' 'Mon,Sun 12-*-* 2,1:23' 'Wed *-1' 'Wed..Wed,Wed *-1' \
		'Wed, 17:48' 'Wed..Sat,Tue 12-10-15 1:2:3' '*-*-7 0:0:0' '10-15' 'monday *-12-* 17:00' \
		'Mon,Fri *-*-3,1,2 *:30:45' '12,14,13,12:20,10,30' '12..14:10,20,30' 'mon,fri *-1/2-1,3 *:30:45' \
		'03-05 08:05:40' '08:05:40' '05:40' 'Sat,Sun 12-05 08:05:40' 'Sat,Sun 08:05:40' \
		'2003-03-05 05:40' '2003-02..04-05' '2003-03-05 05:40 UTC' '03-05' '*-*-* *:*:*' \
		'*-*-* *:00:00' 'Sat *-*-1..7 18:00:00' '*-*~03' 'Mon *-05~07/1' '*-02~01' 'Fri *-*-13' \
		'*-*-* *:*:0/10' '*:2/3' '2016-03-01..15 16:00' '2024..2026-*-01 04:00'; do
		printf 'UTC\t%s\t%s\n' "$B" "$expr"
	done
	# Blanks after the weekdays or the date (systemd reads them as midnight; test-calendarspec.c).
	for expr in 'Wed ' 'Mon,Fri ' 'mon..fri  ' 'Wed, 17:48' 'Mon  02:00' '2003-03-05 ' '*-*~05,3 ' \
		'Mon 2024-01-01 ' 'sat *-1..7 ' '10-15 '; do
		printf 'UTC\t%s\t%s\n' "$B" "$expr"
	done
	# Month ends, leap days, year boundaries.
	for expr in '*-*-31' '*-*-31 12:00' '*-*~1' '*-*~1..7' 'Fri *-*~1..7' '*-02-29' 'Mon *-02-29' \
		'*-02~1' '*-02-28,29' '*-12-31 23:59:59' '*-01-01 00:00:00' '*-02-30' 'yearly' '*-*-29,30,31'; do
		printf 'UTC\t2024-01-30T00:00:00Z\t%s\n' "$expr"
	done
	printf 'UTC\t2024-12-31T23:59:59Z\t%s\n' 'minutely' '*-*-* *:*:*' 'daily' 'monthly' 'mon *-1..7 00:00'
	# Explicit zones, with the local zone UTC and elsewhere.
	for expr in '03:30 Europe/Vienna' 'daily Europe/Berlin' 'Mon..Fri 09:00 Europe/Berlin' \
		'monthly America/New_York' '00:00 US/Eastern' '03:30 UTC' '03:30 utc' 'daily UTC' \
		'*-*~1 Europe/Berlin' '12:00 Asia/Kolkata' '00:00 Etc/GMT+5'; do
		printf 'UTC\t%s\t%s\n' "$B" "$expr"
		printf 'Europe/Berlin\t%s\t%s\n' "$B" "$expr"
	done
	# Daylight-saving changes. Berlin: 2024-03-31 02:00 CET -> 03:00 CEST (01:00Z),
	# 2024-10-27 03:00 CEST -> 02:00 CET (01:00Z).
	for expr in '*:0/20' '*:0/30' '02:30' '02:00' '03:00' '01:30' '0/2:00' '02..03:00/30' '02:*:00' \
		'hourly' 'daily' '*-*-31 02:30'; do
		printf 'Europe/Berlin\t2024-03-30T22:00:00Z\t%s\n' "$expr"
		printf 'Europe/Berlin\t2024-10-26T22:00:00Z\t%s\n' "$expr"
	done
	printf 'Europe/Berlin\t2024-10-27T00:30:00Z\t%s\n' '02:30' '*:0/20' '02:*:00'
	printf 'Europe/Berlin\t2024-10-27T01:00:00Z\t%s\n' '02:30' '*:0/20'
	printf 'UTC\t2024-03-30T22:00:00Z\t%s\n' '*:0/20 Europe/Berlin' '02:30 Europe/Berlin' '0/2:00 Europe/Berlin'
	printf 'UTC\t2024-10-26T22:00:00Z\t%s\n' '*:0/20 Europe/Berlin' '02:30 Europe/Berlin'
	# New York: 2024-03-10 02:00 EST -> 03:00 EDT (07:00Z), 2024-11-03 02:00 EDT -> 01:00 EST (06:00Z).
	for expr in '*:0/30' '01:30' '02:30' '0/2:00' '02..03:00/30' 'hourly'; do
		printf 'America/New_York\t2024-03-10T05:00:00Z\t%s\n' "$expr"
		printf 'America/New_York\t2024-11-03T04:00:00Z\t%s\n' "$expr"
	done
	printf 'UTC\t2024-11-03T04:00:00Z\t%s\n' '*:0/30 America/New_York' '01:30 America/New_York'
	printf 'Europe/Berlin\t2024-11-03T04:00:00Z\t%s\n' '01:30 America/New_York'
	# Far future and the end of systemd's range.
	printf 'UTC\t2024-03-30T12:00:00Z\t%s\n' '2199-12-31 23:59:59' '@1900000000' 'mon @1900000000'
}

elapses() { # zone base expr -> "t1 t2 ..." in RFC 3339 UTC
	local zone=$1 base=$2 expr=$3 sd_base utc=0 out
	sd_base="${base/T/ }"
	sd_base="${sd_base%Z} UTC"
	[ "$zone" = UTC ] && utc=1
	out=$(TZ="$zone" LC_ALL=C SYSTEMD_COLORS=0 systemd-analyze calendar \
		--base-time="$sd_base" --iterations=5 -- "$expr") || {
		echo "systemd-analyze failed for: $expr" >&2
		exit 1
	}
	printf '%s\n' "$out" | awk -v utc="$utc" '
		match($0, /^ *(Next elapse|Iter\. #[0-9]+|\(in UTC\)): /) {
			key = substr($0, 1, RLENGTH); val = substr($0, RLENGTH + 1)
			if (val == "never") { list = list sep "never"; exit }
			inutc = (key ~ /in UTC/)
			if (utc == 1 && inutc) next
			if (utc == 0 && !inutc) next
			split(val, f, " ")
			list = list sep f[2] "T" f[3] "Z"; sep = " "
		}
		END { print list }'
}

printf '# Generated by gen_calendar_table.sh with %s; do not edit by hand.\n' \
	"$(systemd-analyze --version | head -1)"
printf '# zone\tbase\texpression\tnext elapses (UTC)\n'
cases | while IFS=$'\t' read -r zone base expr; do
	nexts=$(elapses "$zone" "$base" "$expr") || exit 1
	printf '%s\t%s\t%s\t%s\n' "$zone" "$base" "$expr" "$nexts"
done
