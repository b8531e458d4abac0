// `unhalt doctor [--json]`
import { noticeChecks, readLibraryNotices } from '../service/library-notices.ts';
import { unhaltHome } from '../service/paths.ts';
import { doctorSummary, runDoctor } from '../vmm/doctor.ts';
import { EXIT_CODES, UsageError, parse, say } from './args.ts';

export const DOCTOR_OPTIONS = { json: { type: 'boolean' } } as const;

export async function doctorCommand(argv: string[]): Promise<number> {
  let values: { json?: boolean };
  try {
    ({ values } = parse(argv, DOCTOR_OPTIONS));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    say(e.message);
    return EXIT_CODES.badInput;
  }
  const report = runDoctor();
  // What the VM library had to repair (a damaged file moved aside, records kept out) stays on
  // disk until dismissed in the app; say it here too.
  const library = noticeChecks(readLibraryNotices(unhaltHome()));
  report.checks.push(...library);
  report.ok &&= library.every((c) => c.ok);
  report.summary = doctorSummary(report.checks, report.kvm, report.hostKind);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    for (const c of report.checks) {
      process.stdout.write(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
      if (c.fix && (!c.ok || c.name === 'library' || c.name === 'host-kind' || c.name === 'host-platform' || c.name === 'linux-guest')) process.stdout.write(`      -> ${c.fix}\n`);
    }
    process.stdout.write(`${report.summary}\n`);
  }
  return report.ok ? EXIT_CODES.ok : EXIT_CODES.badInput;
}
