import t from 'tap'
import { profileOf } from '../../dev/profiles.ts'
import { parseProfile } from '../src/index.ts'

t.test('the documented formats become numbers and trimmed text', async (t) => {
  t.same(parseProfile({
    name: 'Alice Moreau',
    age: ' 34 years ',
    gender: 'female',
    location: 'Göteborg, Sverige',
    Credits: '382.693',
    rank: 'Gold',
    videos: '12',
    photos: '348',
    joined: 'Member since 3 years ago',
    about: '  Coffee ☕ and mountains 🏔️   '
  }), {
    name: 'Alice Moreau',
    age: 34,
    gender: 'female',
    location: 'Göteborg, Sverige',
    credits: 382693,
    rank: 'Gold',
    videos: 12,
    photos: 348,
    joined: 'Member since 3 years ago',
    about: 'Coffee ☕ and mountains 🏔️'
  })
  t.equal(parseProfile({ age: ' 64 years ' }).age, 64)
  t.equal(parseProfile({ age: '1 year' }).age, 1)
  t.equal(parseProfile({ Credits: '1.234.567' }).credits, 1234567)
  t.equal(parseProfile({ Credits: '0' }).credits, 0)
})

t.test('what does not match its documented form is null, never a guess', async (t) => {
  const cases: Array<[string, Parameters<typeof parseProfile>[0], keyof ReturnType<typeof parseProfile>]> = [
    ['age without unit', { age: '34' }, 'age'],
    ['age as words', { age: 'thirty years' }, 'age'],
    ['negative age', { age: '-3 years' }, 'age'],
    ['credits with a decimal comma', { Credits: '382,69' }, 'credits'],
    ['credits badly grouped', { Credits: '38.2693' }, 'credits'],
    ['credits without separators', { Credits: '1234' }, 'credits'],
    ['count with a sign', { videos: '+12' }, 'videos'],
    ['count as a float', { photos: '3.5' }, 'photos'],
    ['empty count', { videos: '' }, 'videos'],
    ['blank text', { about: '   ' }, 'about'],
    ['missing', {}, 'name']
  ]
  for (const [what, user, key] of cases) t.equal(parseProfile(user)[key], null, what)
})

t.test('every simulated profile parses completely', async (t) => {
  for (const username of ['alice', 'bob', 'Łucja', 'x'.repeat(128)]) {
    const parsed = parseProfile(profileOf(username))
    t.notOk(Object.values(parsed).includes(null), username)
  }
})
