// `unhalt doctor [--json]`
import { runDoctor } from '../vmm/doctor.ts';
import { EXIT_CODES, parse } from './args.ts';

export async function doctorCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, { json: { type: 'boolean' } });
  const report = runDoctor();
  if (values.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    for (const c of report.checks) {
      process.stdout.write(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
      if (c.fix && (!c.ok || c.name === 'host-kind')) process.stdout.write(`      -> ${c.fix}\n`);
    }
  }
  return report.ok ? EXIT_CODES.ok : EXIT_CODES.badInput;
}
